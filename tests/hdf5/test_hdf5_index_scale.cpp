// Indexing a dataset of 10 000 chunks: with 1.10.8's H5Dget_chunk_info_by_coord per chunk this
// took 1.6 s here (it scans every chunk per call: 440 s at 100 000 chunks); gpufeed's
// lookup-based index takes milliseconds. No timing is asserted — a quadratic index shows up as a
// slow test. Labelled nosan: writing 10 000 chunks through libhdf5 is slow under the sanitizers.
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
  const auto v = pattern<std::uint8_t>(20000 * 8, 10);
  {
    h5_file f(path);
    dataset_spec s;
    s.dims = {20000, 8};
    s.chunk = {2, 8};
    s.deflate = 1;
    f.add(s, v);
  }
  hdf5_source src(path);
  CHECK(src.shards()[0].read_path == hdf5_read_path::pread_decode);
  auto r = src.make_reader();
  std::vector<std::byte> buf(8);
  r.read(19999, buf);
  CHECK(std::memcmp(buf.data(), v.data() + 19999 * 8, 8) == 0);
}
