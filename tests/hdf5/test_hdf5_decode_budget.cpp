// The decoded-chunk budget bounds all decoded memory, readers' decode scratch included
// (decode_scratch.hpp): chunks of 256 KiB (shuffle + deflate of incompressible bytes, so each
// decode needs a chunk's stored bytes and one filter stage of scratch beside the cached chunk)
// read by 4 loader workers under a budget of 6 chunks, which cannot hold every worker's
// chunk and scratch at once: every record arrives exactly once, byte-equal, the held bytes
// (cached chunks and scratch) never exceed the budget, and scratch was counted. A chunk larger
// than the budget is a config_error naming file, dataset and option, also where it would be
// decoded straight into its record (a record of one chunk), which needs as much scratch.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t row_ints = 16384;  // 64 KiB rows

// Writes rows x row_ints int32 values (pseudo-random: deflate cannot shrink them), chunks of
// chunk_rows rows, shuffle + deflate.
std::vector<std::int32_t> write_file(const fs::path& p, std::size_t rows, std::size_t chunk_rows) {
  std::vector<std::int32_t> v(rows * row_ints);
  std::mt19937 rng(11);
  for (auto& x : v) x = static_cast<std::int32_t>(rng());
  test::h5_file f(p);
  test::dataset_spec s;
  s.file_type = H5T_STD_I32LE;
  s.mem_type = H5T_NATIVE_INT32;
  s.dims = {rows, row_ints};
  s.chunk = {chunk_rows, row_ints};
  s.shuffle = true;
  s.deflate = 1;
  f.add(s, v);
  return v;
}

}  // namespace

TEST_CASE("4 workers on chunks the budget cannot hold for all at once: held bytes stay within it") {
  test::temp_dir dir("decodebudget");
  const fs::path p = dir / "big-chunks.h5";
  constexpr std::size_t rows = 64, chunk_rows = 4;
  const auto v = write_file(p, rows, chunk_rows);
  constexpr std::size_t chunk = chunk_rows * row_ints * 4;  // 256 KiB decoded
  constexpr std::size_t budget = 6 * chunk;
  hdf5_options o;
  o.decode_cache_bytes = budget;
  const hdf5_source src(p, o);
  loader_config c;
  c.batch_size = 4;
  c.order = sample_order::shuffled;
  c.seed = 7;
  c.part = partition{};
  c.epochs = 2;
  c.workers = 4;
  loader<hdf5_source> l(src, c);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int> seen(rows, 0);
    for (auto& b : l.epoch())
      for (std::size_t j = 0; j < b.size(); ++j) {
        const std::uint64_t i = b.indices()[j];
        const auto r = b.record(j);
        REQUIRE(r.size() == row_ints * 4);
        CHECK(std::memcmp(r.data(), v.data() + i * row_ints, r.size()) == 0);
        ++seen[i];
      }
    for (const int n : seen) CHECK(n == 1);
  }
  const decode_stats d = src.decode_stats();
  CHECK(d.cache_budget_bytes == budget);
  CHECK(d.cache_peak_bytes <= budget);
  // Scratch was counted: a decode held a chunk's stored bytes and a filter stage (~2 chunks).
  CHECK(d.scratch_peak_bytes >= 2 * chunk);
  CHECK(d.scratch_peak_bytes <= budget);
}

TEST_CASE("direct decodes (a record is one chunk) count their scratch too") {
  test::temp_dir dir("decodebudgetdirect");
  const fs::path p = dir / "row-chunks.h5";
  constexpr std::size_t rows = 32;
  const auto v = write_file(p, rows, 1);  // one 64 KiB chunk a record: decoded into the record
  constexpr std::size_t row = row_ints * 4;
  SUBCASE("within the budget: exact, held bytes within it") {
    constexpr std::size_t budget = 5 * row;  // two readers' scratch (2 rows each), not four
    hdf5_options o;
    o.decode_cache_bytes = budget;
    const hdf5_source src(p, o);
    loader_config c;
    c.batch_size = 2;
    c.order = sample_order::shuffled;
    c.part = partition{};
    c.epochs = 1;
    c.workers = 4;
    loader<hdf5_source> l(src, c);
    std::vector<int> seen(rows, 0);
    for (auto& b : l.epoch())
      for (std::size_t j = 0; j < b.size(); ++j) {
        const std::uint64_t i = b.indices()[j];
        CHECK(std::memcmp(b.record(j).data(), v.data() + i * row_ints, row) == 0);
        ++seen[i];
      }
    for (const int n : seen) CHECK(n == 1);
    const decode_stats d = src.decode_stats();
    CHECK(d.cache_peak_bytes <= budget);
    CHECK(d.scratch_peak_bytes >= 2 * row);
  }
  SUBCASE("a chunk larger than the whole budget: config_error, also decoded into a record") {
    hdf5_options o;
    o.decode_cache_bytes = row / 2;
    const hdf5_source src(p, o);
    std::vector<std::byte> buf(row);
    const std::string e = test::error_of<config_error>([&] { src.read(3, buf); });
    CHECK(test::has(e, "row-chunks.h5"));
    CHECK(test::has(e, "dataset 'data'"));
    CHECK(test::has(e, "decode_cache_bytes"));
    CHECK(test::has(e, "record 3"));
  }
}
