// Decoding ahead into the shared decoded-chunk cache (hdf5_source::reader::decode_ahead), on a
// gzip + shuffle dataset whose rows span 4 chunks (bands of 16 rows): ahead of the reads, the
// chunks are decoded once and the reads copy them; a decode ahead that comes after the reads of
// its window have begun (its ahead_of_reads guard says so) decodes nothing, also a band the reads
// have read whole and the cache has since evicted, which an unguarded decode ahead decodes a
// second time.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "decode_counter.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;
using gpufeed::test::decode_counter;

namespace {

constexpr std::size_t rows = 64, cols = 1024, band_rows = 16;
constexpr std::size_t row_bytes = cols * 4, band_bytes = band_rows * row_bytes;
constexpr std::size_t chunks_per_band = 4, chunk_bytes = band_bytes / chunks_per_band;

// rows x cols float32 in chunks of 16 x 256, shuffle + deflate, in dir/ahead.h5.
struct fixture {
  gpufeed::test::temp_dir dir{"h5ahead1"};
  fs::path path = dir.path() / "ahead.h5";
  std::vector<float> values = std::vector<float>(rows * cols);
  fixture() {
    for (std::size_t k = 0; k < values.size(); ++k)
      values[k] = static_cast<float>(k / cols) + static_cast<float>(k % 89) / 32.0f;
    gpufeed::test::h5_file f(path);
    gpufeed::test::dataset_spec d;
    d.file_type = d.mem_type = H5T_NATIVE_FLOAT;
    d.dims = {rows, cols};
    d.chunk = {band_rows, cols / chunks_per_band};
    d.shuffle = true;
    d.deflate = 1;
    f.add(d, values);
  }
  // Reads rows [lo, hi) with r, checking their bytes.
  template <class Reader>
  void read_rows(Reader& r, std::uint64_t lo, std::uint64_t hi) const {
    std::vector<std::byte> buf(row_bytes);
    const auto* want = reinterpret_cast<const std::byte*>(values.data());
    for (std::uint64_t i = lo; i < hi; ++i) {
      r.read(i, buf);
      REQUIRE(std::equal(buf.begin(), buf.end(), want + i * row_bytes));
    }
  }
};

// Decodes per chunk since the last take(), summed.
unsigned decodes(const decode_counter::counts& c) {
  unsigned n = 0;
  for (const auto& [chunk, k] : c) n += k;
  return n;
}

}  // namespace

TEST_CASE("decoded ahead of its reads: each chunk decoded once, the reads copy it") {
  const fixture f;
  hdf5_options o;
  o.decode_cache_bytes = 8 * band_bytes;  // the dataset and the decode scratch
  hdf5_source src(f.path, o);
  const decode_counter counter;
  auto ahead = src.make_reader();
  auto r = src.make_reader();
  const std::atomic<std::uint64_t> begun{0};  // no window begun: window 0 is ahead
  ahead.decode_ahead(0, rows, ahead_of_reads(begun, 0));
  CHECK(decodes(decode_counter::take()) == rows / band_rows * chunks_per_band);
  f.read_rows(r, 0, rows);
  CHECK(decodes(decode_counter::take()) == 0);
  const auto ds = src.decode_stats();
  CHECK(ds.decoded_ahead == rows / band_rows * chunks_per_band);
  CHECK(ds.chunks_decoded == rows / band_rows * chunks_per_band);
}

TEST_CASE("a decode ahead after its window's reads began decodes nothing, also an evicted band") {
  const fixture f;
  hdf5_options o;
  // One band, one reader's decode scratch (a chunk's stored bytes and one chunk) and less than
  // a chunk more: each chunk of band 1 is decoded in the room of a chunk of band 0.
  o.decode_cache_bytes = band_bytes + chunk_bytes + chunk_bytes / 2;
  hdf5_source src(f.path, o);
  const decode_counter counter;
  auto r = src.make_reader();
  f.read_rows(r, 0, 2 * band_rows);  // band 0 read whole (spent), then evicted for band 1
  r.idle();
  CHECK(decodes(decode_counter::take()) == 2 * chunks_per_band);

  auto ahead = src.make_reader();
  const std::atomic<std::uint64_t> begun{1};  // window 0's reads have begun
  ahead.decode_ahead(0, 2 * band_rows, ahead_of_reads(begun, 0));
  CHECK(decode_counter::take().empty());
  CHECK(src.decode_stats().decoded_ahead == 0);

  // Unguarded, the same decode ahead decodes chunks of band 0 a second time (in the room of
  // band 1's spent chunks, as long as they last), which is what the guard prevents when a
  // decode-ahead task runs late.
  ahead.decode_ahead(0, band_rows, ahead_of_reads{});
  const auto again = decode_counter::take();
  CHECK(again.size() >= 1);
  CHECK(decodes(again) == again.size());
  CHECK(src.decode_stats().decoded_ahead == again.size());
}
