// Descriptors bounded (hdf5_options::max_open_shards): 200 shards read under a descriptor limit
// of 64 above what the process holds, through the source (every record, in an order that
// revisits closed shards) and through a loader with several workers, each record exactly once
// and byte-equal; without the bound the same limit is an io_error saying "too many open files".
#include <doctest/doctest.h>
#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "fd_count.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;

namespace {

constexpr int shards = 200;
constexpr std::uint64_t per_shard = 5;

// Record r of shard k: 3 + (k + r) % 5 bytes, byte j = k * 7 + r + j.
std::vector<std::uint8_t> record(int k, std::uint64_t r) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(3 + (k + r) % 5));
  for (std::size_t j = 0; j < v.size(); ++j) v[j] = static_cast<std::uint8_t>(k * 7 + r + j);
  return v;
}

std::vector<fs::path> write_shards(const fs::path& dir) {
  std::vector<fs::path> paths;
  for (int k = 0; k < shards; ++k) {
    std::vector<std::uint8_t> data;
    std::vector<std::uint64_t> offsets{0};
    for (std::uint64_t r = 0; r < per_shard; ++r) {
      const auto v = record(k, r);
      data.insert(data.end(), v.begin(), v.end());
      offsets.push_back(data.size());
    }
    paths.push_back(dir / ("s-" + std::to_string(1000 + k) + ".h5"));
    test::h5_file f(paths.back());
    test::dataset_spec d;
    d.dims = {data.size()};
    f.add(d, data);
    f.add_offsets(offsets);
  }
  return paths;
}

std::vector<std::uint8_t> expected(std::uint64_t i) {
  return record(static_cast<int>(i / per_shard), i % per_shard);
}

std::vector<std::uint8_t> as_vector(std::span<const std::byte> b) {
  std::vector<std::uint8_t> v(b.size());
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

}  // namespace

TEST_CASE("200 shards read under a descriptor limit 64 above the baseline (max_open_shards 32)") {
  test::temp_dir dir("openlimit");
  const auto paths = write_shards(dir.path());
  const fs::path canon = fs::canonical(dir.path());
  hdf5_options o;
  o.max_open_shards = 32;
  const test::low_fd_limit limit(64);
  const hdf5_source src(paths, o);
  REQUIRE(src.size() == shards * per_shard);
  // Through the source: a shuffled order, twice (closed shards reopen), every record equal.
  std::vector<std::uint64_t> order(src.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(5);
  auto r = src.make_reader();
  std::vector<std::byte> buf(src.max_record_size());
  for (int pass = 0; pass < 2; ++pass) {
    std::shuffle(order.begin(), order.end(), rng);
    for (const std::uint64_t i : order) {
      const std::size_t n = src.record_size(i);
      r.read(i, std::span<std::byte>(buf.data(), n));
      REQUIRE(as_vector(std::span<const std::byte>(buf.data(), n)) == expected(i));
    }
    CHECK(test::fds_under(canon) <= 32);
  }
  // Through a loader with 3 workers: each record exactly once, byte-equal.
  loader_config c;
  c.batch_size = 16;
  c.order = sample_order::shuffled;
  c.seed = 3;
  c.part = partition{};
  c.epochs = 1;
  c.workers = 3;
  loader<hdf5_source> l(src, c);
  std::vector<int> seen(static_cast<std::size_t>(src.size()), 0);
  for (auto& b : l.epoch())
    for (std::size_t j = 0; j < b.size(); ++j) {
      const std::uint64_t i = b.indices()[j];
      CHECK(as_vector(b.record(j)) == expected(i));
      ++seen[static_cast<std::size_t>(i)];
    }
  for (const int n : seen) CHECK(n == 1);
  CHECK(test::fds_under(canon) <= 32 + 3);
}

TEST_CASE("a reader keeps the shard it read last pinned open until it reads another or idles") {
  // The pin stays between reads (one pin per shard, not two atomic operations per record); the
  // bound still closes the shard once the reader moves on or idles.
  test::temp_dir dir("openlimitheld");
  const auto paths = write_shards(dir.path());
  hdf5_options o;
  o.max_open_shards = 2;
  const hdf5_source src(paths, o);
  const fs::path first = fs::canonical(paths[0]);
  std::vector<std::byte> buf(src.max_record_size());
  auto read_with = [&](auto& reader, std::uint64_t i) {
    // Not src.record_size(i): that opens the shard itself, before the reader lets go of its last.
    const std::size_t n = expected(i).size();
    reader.read(i, std::span<std::byte>(buf.data(), buf.size()));
    REQUIRE(as_vector(std::span<const std::byte>(buf.data(), n)) == expected(i));
  };
  auto held = src.make_reader();
  read_with(held, 1);  // shard 0, pinned by `held` from now on
  auto other = src.make_reader();
  for (std::uint64_t k = 1; k < 12; ++k) read_with(other, k * per_shard);  // shards 1..11
  CHECK(test::fds_under(first) == 1);  // held open by the pin
  CHECK(test::fds_under(fs::canonical(dir.path())) <= 2);
  read_with(held, 2);  // shard 0 again: still open, no reopen
  held.idle();         // lets go of shard 0
  for (std::uint64_t k = 12; k < 24; ++k) read_with(other, k * per_shard);
  CHECK(test::fds_under(first) == 0);
  read_with(held, 3);  // shard 0 reopens on its next read
  CHECK(test::fds_under(first) == 1);
  read_with(held, 5 * per_shard);  // moving to shard 5 lets go of shard 0
  for (std::uint64_t k = 24; k < 36; ++k) read_with(other, k * per_shard);
  CHECK(test::fds_under(first) == 0);
  CHECK(test::fds_under(fs::canonical(paths[5])) == 1);  // `held` pins shard 5 now
}

TEST_CASE("eager opening of 200 shards under the same limit keeps 32 open") {
  test::temp_dir dir("openlimiteager");
  const auto paths = write_shards(dir.path());
  hdf5_options o;
  o.max_open_shards = 32;
  o.open = hdf5_options::open_kind::eager;
  const test::low_fd_limit limit(64);
  const hdf5_source src(paths, o);
  CHECK(test::fds_under(fs::canonical(dir.path())) <= 32);
  std::vector<std::byte> buf(src.max_record_size());
  for (std::uint64_t i = 0; i < src.size(); i += 7) {
    const std::size_t n = src.record_size(i);
    src.read(i, std::span<std::byte>(buf.data(), n));
    CHECK(as_vector(std::span<const std::byte>(buf.data(), n)) == expected(i));
  }
}

TEST_CASE("without a bound, running out of descriptors is io_error 'too many open files'") {
  test::temp_dir dir("openlimitnone");
  const auto paths = write_shards(dir.path());
  hdf5_options o;
  o.max_open_shards = 0;
  const test::low_fd_limit limit(64);
  // The source lives inside the throwing call: its descriptors are closed before the error is
  // examined (a sanitizer's checks need a free descriptor).
  const std::string e = test::error_of<io_error>([&] {
    const hdf5_source src(paths, o);
    std::vector<std::byte> buf(src.max_record_size());
    for (std::uint64_t i = 0; i < src.size(); ++i)
      src.read(i, std::span<std::byte>(buf.data(), src.record_size(i)));
  });
  CHECK(test::has(e, "too many open files"));
  CHECK(test::has(e, ".h5"));
}

TEST_CASE("H5Dread fallback shards (compact storage) close and reopen under max_open_shards 3") {
  test::temp_dir dir("openlimitfb");
  std::vector<fs::path> paths;
  std::vector<std::int32_t> all;
  for (int k = 0; k < 12; ++k) {
    std::vector<std::int32_t> v(4 * 2);
    for (std::size_t j = 0; j < v.size(); ++j) v[j] = static_cast<std::int32_t>(k * 100 + j);
    all.insert(all.end(), v.begin(), v.end());
    paths.push_back(dir / ("c-" + std::to_string(100 + k) + ".h5"));
    test::h5_file f(paths.back());
    test::dataset_spec s;
    s.file_type = H5T_STD_I32LE;
    s.mem_type = H5T_NATIVE_INT32;
    s.dims = {4, 2};
    s.compact = true;
    f.add(s, v);
  }
  hdf5_options o;
  o.max_open_shards = 3;
  const hdf5_source src(paths, o);
  REQUIRE(src.shards()[0].read_path == hdf5_read_path::h5dread_fallback);
  auto r = src.make_reader();
  std::int32_t row[2];
  for (int pass = 0; pass < 3; ++pass)
    for (std::uint64_t j = 0; j < src.size(); ++j) {
      const std::uint64_t i = (j * 5 + static_cast<std::uint64_t>(pass)) % src.size();
      r.read(i, std::as_writable_bytes(std::span<std::int32_t>(row, 2)));
      CHECK(row[0] == all[2 * i]);
      CHECK(row[1] == all[2 * i + 1]);
    }
  // Two descriptors a fallback shard (the pread file and HDF5's), three shards open at most.
  CHECK(test::fds_under(fs::canonical(dir.path())) <= 2 * 3);
}
