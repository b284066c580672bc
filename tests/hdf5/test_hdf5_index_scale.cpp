// Indexing a dataset of 20 000 chunks: 1.10.8's H5Dget_chunk_info_by_coord per chunk would take
// about 6 s (it scans every chunk per call: 1.6 s at 10 000 chunks, 440 s at 100 000); gpufeed's
// lookup-based index takes milliseconds. No timing is asserted — a quadratic index shows up as a
// slow test. Unfiltered chunks: writing deflated ones is slow (HDF5's per-chunk buffers).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::pattern;

TEST_CASE("indexing is linear in the number of chunks") {
  gpufeed::test::temp_dir dir("h5lin");
  const auto path = dir / "many.h5";
  const auto v = pattern<std::uint8_t>(40000 * 8, 10);
  {
    h5_file f(path);
    dataset_spec s;
    s.dims = {40000, 8};
    s.chunk = {2, 8};
    f.add(s, v);
  }
  hdf5_source src(path);
  CHECK(src.shards()[0].read_path == hdf5_read_path::pread_raw);
  auto r = src.make_reader();
  std::vector<std::byte> buf(8);
  r.read(39999, buf);
  CHECK(std::memcmp(buf.data(), v.data() + 39999 * 8, 8) == 0);
}
