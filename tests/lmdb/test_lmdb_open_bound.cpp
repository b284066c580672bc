// Descriptors bounded (lmdb_options::max_open_shards): 320 LMDB shards read under a descriptor
// limit of 128 in all (lowered for this process, restored after) with 16 environments open at
// most: shuffled epochs through the source and through a loader with several workers deliver
// every record exactly once, byte-equal, reopening closed shards without a rescan; a shard
// replaced on disk after its environment was closed is a format_error naming it; without the
// bound the same limit is an io_error saying "too many open files".
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "fd_count.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/loader.hpp"
#include "lmdb_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;

namespace {

constexpr int shards = 320;
constexpr std::uint64_t per_shard = 4;
constexpr std::size_t bound = 16;

// Record r of shard k: 5 + (k + r) % 7 bytes of a pattern of k and r.
std::string record(int k, std::uint64_t r, int salt = 0) {
  std::string v(static_cast<std::size_t>(5 + (k + static_cast<int>(r)) % 7), '\0');
  for (std::size_t j = 0; j < v.size(); ++j)
    v[j] = static_cast<char>(k * 13 + static_cast<int>(r) * 3 + static_cast<int>(j) + salt);
  return v;
}

void write_shard(const fs::path& p, int k, int salt = 0) {
  test::kv_list kv;
  for (std::uint64_t r = 0; r < per_shard; ++r) kv.emplace_back(test::key8(r), record(k, r, salt));
  test::lmdb_write_options w;
  w.env_flags = MDB_NOSYNC;  // test files: no fsync per shard
  test::write_lmdb(p, kv, w);
}

std::vector<fs::path> write_shards(const fs::path& dir, int count = shards) {
  std::vector<fs::path> paths;
  for (int k = 0; k < count; ++k) {
    paths.push_back(dir / ("s-" + std::to_string(1000 + k) + ".lmdb"));
    write_shard(paths.back(), k);
  }
  return paths;
}

std::string expected(std::uint64_t i) {
  return record(static_cast<int>(i / per_shard), i % per_shard);
}

std::string as_string(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// RLIMIT_NOFILE's soft limit set to `n` descriptors in all; restored at scope exit.
class fd_limit {
 public:
  explicit fd_limit(rlim_t n) {
    if (::getrlimit(RLIMIT_NOFILE, &saved_) != 0) throw std::runtime_error("test: getrlimit");
    rlimit r = saved_;
    r.rlim_cur = n;
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) throw std::runtime_error("test: setrlimit");
  }
  fd_limit(const fd_limit&) = delete;
  fd_limit& operator=(const fd_limit&) = delete;
  ~fd_limit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }

 private:
  rlimit saved_{};
};

}  // namespace

TEST_CASE("lmdb: 320 shards under a descriptor limit of 128 (max_open_shards 16)") {
  test::temp_dir dir("lmopenbound");
  const auto paths = write_shards(dir.path());
  const fs::path canon = fs::canonical(dir.path());
  const fd_limit limit(128);
  lmdb_options o;
  o.max_open_shards = bound;
  SUBCASE("lazy") {}
  SUBCASE("eager") { o.open = lmdb_options::open_kind::eager; }
  const lmdb_source src(paths, o);
  REQUIRE(src.size() == shards * per_shard);
  CHECK(test::fds_under(canon) <= static_cast<int>(bound));
  // Through a reader: shuffled orders, twice (closed shards reopen), every record equal.
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
      REQUIRE(as_string(std::span<const std::byte>(buf.data(), n)) == expected(i));
    }
    CHECK(test::fds_under(canon) <= static_cast<int>(bound) + 1);
  }
  r.idle();
  // Through loaders with 4 workers, two shuffled epochs: each record exactly once, byte-equal.
  loader_config c;
  c.batch_size = 16;
  c.order = sample_order::shuffled;
  c.seed = 3;
  c.part = partition{};
  c.epochs = 2;
  c.workers = 4;
  loader<lmdb_source> l(src, c);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int> seen(static_cast<std::size_t>(src.size()), 0);
    for (auto& b : l.epoch())
      for (std::size_t j = 0; j < b.size(); ++j) {
        const std::uint64_t i = b.indices()[j];
        CHECK(as_string(b.record(j)) == expected(i));
        ++seen[static_cast<std::size_t>(i)];
      }
    for (const int n : seen) CHECK(n == 1);
    // The bound, exceeded by at most one shard per reading thread.
    CHECK(test::fds_under(canon) <= static_cast<int>(bound) + 4);
  }
}

TEST_CASE("lmdb: a shard replaced after the LRU closed it is a format_error naming it") {
  test::temp_dir dir("lmopenreplaced");
  const auto paths = write_shards(dir.path(), 40);
  lmdb_options o;
  o.max_open_shards = 4;
  const lmdb_source src(paths, o);
  auto r = src.make_reader();
  std::vector<std::byte> buf(src.max_record_size());
  const auto read = [&](std::uint64_t i) {
    r.read(i, std::span<std::byte>(buf.data(), src.record_size(i)));
    return as_string(std::span<const std::byte>(buf.data(), src.record_size(i)));
  };
  const int victim = 3;
  const std::uint64_t at = victim * per_shard;
  CHECK(read(at) == expected(at));
  // Reading ten other shards closes the victim's environment (4 open at most).
  for (int k = 10; k < 20; ++k) CHECK(read(k * per_shard) == expected(k * per_shard));
  r.idle();
  const fs::path fresh = dir / "fresh.lmdb";
  SUBCASE("another database renamed over it") {
    write_shard(fresh, victim, 1);  // same sizes, other bytes: only its identity tells
    fs::rename(fresh / "data.mdb", paths[victim] / "data.mdb");
  }
  SUBCASE("rewritten in place (a writer committed)") {
    test::kv_list kv{{test::key8(1), record(victim, 1, 2)}};
    test::write_lmdb(paths[victim], kv);
  }
  const std::string e = test::error_of<format_error>([&] { (void)read(at); });
  CHECK(test::has(e, "replaced or changed since it was opened"));
  CHECK(test::has(e, "s-" + std::to_string(1000 + victim) + ".lmdb"));
  // The other shards read on.
  CHECK(read(30 * per_shard + 1) == expected(30 * per_shard + 1));
}

TEST_CASE("lmdb: mutable shards (lock files, no identity by size) close and reopen too") {
  test::temp_dir dir("lmopenmutable");
  const auto paths = write_shards(dir.path(), 40);
  const fs::path canon = fs::canonical(dir.path());
  lmdb_options o;
  o.immutable = false;
  o.max_open_shards = 4;
  const lmdb_source src(paths, o);
  // Two descriptors a mutable shard (data.mdb and lock.mdb), 4 shards open at most.
  CHECK(test::fds_under(canon) <= 2 * 4);
  std::vector<std::uint64_t> order(src.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(9);
  auto r = src.make_reader();
  std::vector<std::byte> buf(src.max_record_size());
  for (int pass = 0; pass < 2; ++pass) {
    std::shuffle(order.begin(), order.end(), rng);
    for (const std::uint64_t i : order) {
      const std::size_t n = src.record_size(i);
      r.read(i, std::span<std::byte>(buf.data(), n));
      REQUIRE(as_string(std::span<const std::byte>(buf.data(), n)) == expected(i));
    }
  }
  r.idle();
  CHECK(test::fds_under(canon) <= 2 * 4);
}

TEST_CASE("lmdb: max_open_shards 0 under too low a limit is io_error 'too many open files'") {
  test::temp_dir dir("lmopenunbounded");
  const auto paths = write_shards(dir.path());
  const fd_limit limit(128);
  lmdb_options o;
  o.max_open_shards = 0;
  // The source lives inside the throwing call: its descriptors are closed before the error is
  // examined (a sanitizer's checks need a free descriptor).
  const std::string e = test::error_of<io_error>([&] {
    const lmdb_source src(paths, o);
    std::vector<std::byte> buf(src.max_record_size());
    for (std::uint64_t i = 0; i < src.size(); ++i)
      src.read(i, std::span<std::byte>(buf.data(), src.record_size(i)));
  });
  CHECK(test::has(e, "too many open files"));
  CHECK(test::has(e, "data.mdb"));
  CHECK(test::has(e, "EMFILE"));
  CHECK(test::has(e, "returned 24"));  // the errno
}
