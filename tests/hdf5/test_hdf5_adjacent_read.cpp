// Runs of adjacent records read with one call (hdf5_source::reader::read_run), and the loader's
// use of it: exact bytes for fixed rows, blob records and big-endian data, a run cut at its
// shard's end, chunked shards left to per-record reads, a wrong destination refused, a
// truncated shard an io_error naming the file — and through the loader every record exactly
// once with its own bytes in every order, a truncated shard's failures each naming its record.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "h5_writer.hpp"
#include "hdf5_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::pattern;

namespace {

constexpr std::size_t cols = 24;  // int32 per row: 96-byte records

// Two contiguous shards of int32 rows (300 and 200 rows; the second big-endian on disk) and a
// chunked one (100 rows), with every record's expected bytes.
struct shards {
  gpufeed::test::temp_dir dir{"h5adj"};
  std::vector<std::filesystem::path> paths;
  std::vector<std::vector<std::byte>> expected;

  shards() {
    const std::uint64_t rows[] = {300, 200, 100};
    for (int k = 0; k < 3; ++k) {
      const auto v = pattern<std::int32_t>(rows[k] * cols, 40 + k);
      const auto path = dir / ("a" + std::to_string(k) + ".h5");
      h5_file f(path);
      dataset_spec s;
      s.file_type = k == 1 ? H5T_STD_I32BE : H5T_STD_I32LE;
      s.mem_type = H5T_NATIVE_INT32;
      s.dims = {rows[k], cols};
      if (k == 2) s.chunk = {10, cols};
      f.add(s, v);
      for (auto& r : gpufeed::test::rows_of(v, cols)) expected.push_back(std::move(r));
      paths.push_back(path);
    }
  }
};

// Records [first, first + n) read as one run into separate buffers; returns how many were read.
std::size_t run_into(hdf5_source::reader& r, std::uint64_t first, std::size_t n,
                     std::vector<std::vector<std::byte>>& out) {
  out.assign(n, std::vector<std::byte>(cols * 4, std::byte{0x5a}));
  std::vector<std::span<std::byte>> dst;
  for (auto& b : out) dst.emplace_back(b);
  return r.read_run(first, std::span<const std::span<std::byte>>(dst));
}

}  // namespace

TEST_CASE("read_run: exact bytes, cut at the shard's end, none on a chunked shard") {
  shards d;
  hdf5_source src(d.paths);
  auto r = src.make_reader();
  std::vector<std::vector<std::byte>> got;
  // Inside shard 0, into separate buffers.
  REQUIRE(run_into(r, 10, 50, got) == 50);
  for (std::size_t j = 0; j < 50; ++j) CHECK(got[j] == d.expected[10 + j]);
  // Across shards 0 and 1: the run stops at shard 0's end.
  REQUIRE(run_into(r, 290, 30, got) == 10);
  for (std::size_t j = 0; j < 10; ++j) CHECK(got[j] == d.expected[290 + j]);
  // Shard 1 is big-endian on disk: every element swapped.
  REQUIRE(run_into(r, 300, 200, got) == 200);
  for (std::size_t j = 0; j < 200; ++j) CHECK(got[j] == d.expected[300 + j]);
  // Shard 2 is chunked: nothing read, the caller reads its records one by one.
  CHECK(run_into(r, 500, 20, got) == 0);
  CHECK(got[0] == std::vector<std::byte>(cols * 4, std::byte{0x5a}));
  // One buffer for the whole run (adjacent places: one range for the OS).
  std::vector<std::byte> one(100 * cols * 4);
  std::vector<std::span<std::byte>> dst;
  for (std::size_t j = 0; j < 100; ++j) dst.emplace_back(one.data() + j * cols * 4, cols * 4);
  REQUIRE(r.read_run(150, std::span<const std::span<std::byte>>(dst)) == 100);
  for (std::size_t j = 0; j < 100; ++j)
    CHECK(std::equal(dst[j].begin(), dst[j].end(), d.expected[150 + j].begin()));
}

TEST_CASE("read_run of blob records (offsets), and a destination of the wrong size") {
  gpufeed::test::temp_dir dir("h5adjb");
  const auto path = dir / "b.h5";
  std::vector<std::uint64_t> offsets{0};
  for (std::uint64_t k = 0; k < 60; ++k) offsets.push_back(offsets.back() + 1 + (k * 37) % 90);
  const auto bytes = pattern<std::uint8_t>(offsets.back(), 5);
  {
    h5_file f(path);
    dataset_spec data;
    data.dims = {offsets.back()};
    f.add(data, bytes);
    f.add_offsets(offsets);
  }
  hdf5_source src(path);
  auto r = src.make_reader();
  std::vector<std::vector<std::byte>> out;
  std::vector<std::span<std::byte>> dst;
  for (std::uint64_t i = 5; i < 45; ++i) out.emplace_back(offsets[i + 1] - offsets[i]);
  for (auto& b : out) dst.emplace_back(b);
  REQUIRE(r.read_run(5, std::span<const std::span<std::byte>>(dst)) == 40);
  for (std::uint64_t i = 5; i < 45; ++i)
    CHECK(std::memcmp(out[i - 5].data(), bytes.data() + offsets[i], out[i - 5].size()) == 0);
  // A destination one byte short names its record.
  out[7].pop_back();
  dst[7] = std::span<std::byte>(out[7]);
  try {
    (void)r.read_run(5, std::span<const std::span<std::byte>>(dst));
    FAIL("expected config_error");
  } catch (const config_error& e) {
    CHECK(e.record() == 12);
  }
}

TEST_CASE("read_run on a truncated shard: io_error naming the file") {
  shards d;
  hdf5_source src(d.paths[0]);
  std::filesystem::resize_file(d.paths[0], std::filesystem::file_size(d.paths[0]) / 2);
  auto r = src.make_reader();
  std::vector<std::vector<std::byte>> got;
  CHECK(run_into(r, 0, 20, got) == 20);  // before the cut
  try {
    (void)run_into(r, 100, 200, got);
    FAIL("expected io_error");
  } catch (const io_error& e) {
    CHECK(e.file() == d.paths[0].string());
    CHECK(e.record() == 100);
  }
}

TEST_CASE("the loader reads runs: every record once with its bytes, in every order") {
  shards d;
  for (const auto method : {hdf5_options::read_method::map, hdf5_options::read_method::pread})
  for (const auto order : {sample_order::sequential, sample_order::shuffled,
                           sample_order::block_shuffled}) {
    CAPTURE(static_cast<int>(method));
    CAPTURE(static_cast<int>(order));
    hdf5_options o;
    o.reads = method;
    hdf5_source src(d.paths, o);
    loader_config c;
    c.batch_size = 64;
    c.order = order;
    c.workers = 3;
    c.prefetch = 3;
    c.epochs = 2;
    loader<hdf5_source> l(src, c);
    std::vector<std::uint64_t> seen;
    std::size_t wrong = 0;
    while (auto b = l.next()) {
      for (std::size_t k = 0; k < b->size(); ++k) {
        const auto i = b->indices()[k];
        const auto rec = b->record(k);
        const auto& want = d.expected[static_cast<std::size_t>(i)];
        wrong += rec.size() != want.size() || !std::equal(want.begin(), want.end(), rec.begin());
        seen.push_back(i);
      }
    }
    CHECK(wrong == 0);
    std::sort(seen.begin(), seen.end());
    std::vector<std::uint64_t> all;
    for (int e = 0; e < 2; ++e)
      for (std::uint64_t i = 0; i < src.size(); ++i) all.push_back(i);
    std::sort(all.begin(), all.end());
    CHECK(seen == all);
  }
}

TEST_CASE("the loader on a truncated shard: runs fall back to records, each failure its own") {
  shards d;
  hdf5_source src(d.paths[0]);  // 300 rows of 96 bytes, contiguous
  std::filesystem::resize_file(d.paths[0], std::filesystem::file_size(d.paths[0]) - 150 * 96);
  loader_config c;
  c.batch_size = 50;
  c.order = sample_order::sequential;
  c.workers = 2;
  c.epochs = 1;
  c.on_error = error_policy::skip;
  loader<hdf5_source> l(src, c);
  std::vector<std::uint64_t> seen;
  std::size_t wrong = 0;
  while (auto b = l.next()) {
    for (std::size_t k = 0; k < b->size(); ++k) {
      const auto i = b->indices()[k];
      const auto rec = b->record(k);
      const auto& want = d.expected[static_cast<std::size_t>(i)];
      wrong += !std::equal(want.begin(), want.end(), rec.begin());
      seen.push_back(i);
    }
  }
  CHECK(wrong == 0);
  // Every record wholly before the cut arrives; none after it.
  std::sort(seen.begin(), seen.end());
  REQUIRE(!seen.empty());
  CHECK(seen.front() == 0);
  CHECK(seen.back() < 150);
  CHECK(seen.size() >= 140);
  for (std::size_t j = 0; j < seen.size(); ++j) CHECK(seen[j] == j);
  const auto st = l.stats();
  CHECK(st.skipped == 300 - seen.size());
  REQUIRE(!st.skipped_log.empty());
  for (const auto& sk : st.skipped_log) {
    CHECK(sk.index >= seen.size());
    CHECK(sk.what.find("record " + std::to_string(sk.index)) != std::string::npos);
  }
}
