// Indexing chunked datasets is linear in the number of chunks. 1.10.8's
// H5Dget_chunk_info[_by_coord] scan every chunk per call (6 s at 20 000 chunks, 440 s at
// 100 000), so an index built on them is quadratic; gpufeed's makes one H5Dget_chunk_storage_size
// and one H5Dread_chunk (a B-tree lookup) per chunk. The test counts the HDF5 chunk-query calls
// made while opening datasets of N and 8N chunks, by interposing them in this executable (gpufeed
// is header-only: its calls resolve here first and are forwarded through dlsym(RTLD_NEXT)), and
// requires the scanning calls never to be used and the rest to grow 8x, not 64x; then reads every
// record back. Unfiltered chunks: writing deflated ones is slow (HDF5's per-chunk buffers).
#include <doctest/doctest.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::pattern;

namespace {
std::atomic<bool> armed{false};
std::atomic<std::uint64_t> lookups{0}, scans{0};  // per-chunk lookups; calls that scan all chunks

template <class F>
F real(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) {
    std::fprintf(stderr, "test_hdf5_index_scale: %s not found in libhdf5\n", name);
    std::abort();
  }
  return reinterpret_cast<F>(p);
}
void count(std::atomic<std::uint64_t>& c) noexcept {
  if (armed.load(std::memory_order_relaxed)) c.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
herr_t H5Dget_chunk_storage_size(hid_t d, const hsize_t* offset, hsize_t* bytes) {
  static auto f = real<herr_t (*)(hid_t, const hsize_t*, hsize_t*)>("H5Dget_chunk_storage_size");
  count(lookups);
  return f(d, offset, bytes);
}
herr_t H5Dread_chunk(hid_t d, hid_t dxpl, const hsize_t* offset, uint32_t* filters, void* buf) {
  static auto f =
      real<herr_t (*)(hid_t, hid_t, const hsize_t*, uint32_t*, void*)>("H5Dread_chunk");
  count(lookups);
  return f(d, dxpl, offset, filters, buf);
}
herr_t H5Dget_chunk_info_by_coord(hid_t d, const hsize_t* offset, unsigned* mask, haddr_t* addr,
                                  hsize_t* size) {
  static auto f = real<herr_t (*)(hid_t, const hsize_t*, unsigned*, haddr_t*, hsize_t*)>(
      "H5Dget_chunk_info_by_coord");
  count(scans);
  return f(d, offset, mask, addr, size);
}
herr_t H5Dget_chunk_info(hid_t d, hid_t space, hsize_t index, hsize_t* offset, unsigned* mask,
                         haddr_t* addr, hsize_t* size) {
  static auto f = real<herr_t (*)(hid_t, hid_t, hsize_t, hsize_t*, unsigned*, haddr_t*, hsize_t*)>(
      "H5Dget_chunk_info");
  count(scans);
  return f(d, space, index, offset, mask, addr, size);
}
}

namespace {
struct open_counts {
  std::uint64_t lookups = 0, scans = 0;
};

// Writes `rows` rows of 8 bytes in chunks of 2 rows, opens it counting chunk queries, and reads
// every record back.
open_counts index_rows(const gpufeed::test::temp_dir& dir, std::uint64_t rows) {
  const auto path = dir / ("many" + std::to_string(rows) + ".h5");
  const auto v = pattern<std::uint8_t>(rows * 8, 10);
  {
    h5_file f(path);
    dataset_spec s;
    s.dims = {rows, 8};
    s.chunk = {2, 8};
    f.add(s, v);
  }
  lookups = 0;
  scans = 0;
  armed = true;
  hdf5_source src(path);
  armed = false;
  const open_counts c{lookups.load(), scans.load()};
  CHECK(src.shards()[0].read_path == hdf5_read_path::pread_raw);
  REQUIRE(src.size() == rows);
  auto r = src.make_reader();
  std::vector<std::byte> buf(8);
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < rows; ++i) {
    r.read(i, buf);
    wrong += std::memcmp(buf.data(), v.data() + i * 8, 8) != 0;
  }
  CHECK(wrong == 0);
  return c;
}
}  // namespace

TEST_CASE("indexing is linear in the number of chunks") {
  gpufeed::test::temp_dir dir("h5lin");
  const std::uint64_t n_chunks = 2500;
  const auto small = index_rows(dir, 2 * n_chunks);
  const auto large = index_rows(dir, 2 * 8 * n_chunks);
  MESSAGE("chunk queries while indexing: " << small.lookups << " for " << n_chunks
          << " chunks, " << large.lookups << " for " << 8 * n_chunks << "; scanning calls "
          << small.scans + large.scans);
  CHECK(small.scans == 0);
  CHECK(large.scans == 0);
  CHECK(small.lookups >= n_chunks);  // the counter counts: at least one query per chunk
  CHECK(small.lookups <= 4 * n_chunks);
  CHECK(large.lookups <= 4 * 8 * n_chunks);
  CHECK(large.lookups <= 9 * small.lookups);  // 8x the chunks, about 8x the queries
}
