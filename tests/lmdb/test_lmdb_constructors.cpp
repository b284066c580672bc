// lmdb_source's constructors take the shard lists users write: one name (const char*,
// std::string, path), a braced list of names (any mix of those; `lmdb_source({"a", "b"})` once
// also matched path's iterator-pair constructor: ambiguous), std::vector<std::string>,
// std::vector<path> and any other range of path-like values. Each spelling must compile and open
// exactly the shards named, in order.
#include <doctest/doctest.h>

#include <array>
#include <filesystem>
#include <list>
#include <ranges>
#include <string>
#include <vector>

#include "gpufeed/lmdb_source.hpp"
#include "lmdb_test_util.hpp"
#include "test_util.hpp"

namespace {

using gpufeed::lmdb_source;

// Every record's value, in order: shard k holds k + 1 values "k.j".
std::vector<std::string> records(const lmdb_source& src) {
  std::vector<std::string> out;
  for (std::uint64_t i = 0; i < src.size(); ++i) {
    std::vector<std::byte> buf(src.record_size(i));
    src.read(i, buf);
    out.push_back(gpufeed::test::as_string(buf));
  }
  return out;
}

const std::vector<std::string> shard0 = {"0.0"};
const std::vector<std::string> shards01 = {"0.0", "1.0", "1.1"};

struct in_shard_dir {
  gpufeed::test::temp_dir dir{"lmdbctor"};
  std::filesystem::path old = std::filesystem::current_path();
  in_shard_dir() {
    for (int k = 0; k < 2; ++k) {
      gpufeed::test::kv_list kv;
      for (int j = 0; j <= k; ++j)
        kv.emplace_back(gpufeed::test::key8(static_cast<std::uint64_t>(j)),
                        std::to_string(k) + "." + std::to_string(j));
      gpufeed::test::write_lmdb(dir / ("train-" + std::to_string(k)), kv);
    }
    std::filesystem::current_path(dir.path());
  }
  ~in_shard_dir() { std::filesystem::current_path(old); }
};

}  // namespace

TEST_CASE("lmdb_source: braced lists of names") {
  in_shard_dir here;
  CHECK(records(lmdb_source({"train-0", "train-1"})) == shards01);
  CHECK(records(lmdb_source({"train-0"})) == shard0);
  CHECK(records(lmdb_source({std::string("train-0"), std::string("train-1")})) == shards01);
  CHECK(records(lmdb_source({std::filesystem::path("train-0"), std::filesystem::path("train-1")})) ==
        shards01);
  CHECK(records(lmdb_source({"train-0", std::string("train-1")})) == shards01);
  CHECK(records(lmdb_source({"train-0", "train-1"}, gpufeed::lmdb_options{})) == shards01);
  lmdb_source braced_init{"train-1", "train-0"};
  CHECK(records(braced_init) == std::vector<std::string>{"1.0", "1.1", "0.0"});
}

TEST_CASE("lmdb_source: one name as const char*, std::string or path") {
  in_shard_dir here;
  CHECK(records(lmdb_source("train-0")) == shard0);
  const std::string name = "train-0";
  CHECK(records(lmdb_source(name)) == shard0);
  const std::filesystem::path p = "train-0";
  CHECK(records(lmdb_source(p, gpufeed::lmdb_options{})) == shard0);
}

TEST_CASE("lmdb_source: vectors and other ranges of path-like values") {
  in_shard_dir here;
  const std::vector<std::string> names = {"train-0", "train-1"};
  CHECK(records(lmdb_source(names)) == shards01);
  CHECK(records(lmdb_source(std::vector<std::string>(names))) == shards01);
  const std::vector<std::filesystem::path> paths(names.begin(), names.end());
  CHECK(records(lmdb_source(paths)) == shards01);
  const std::array<const char*, 2> arr = {"train-0", "train-1"};
  CHECK(records(lmdb_source(arr)) == shards01);
  const std::list<std::string> lst(names.begin(), names.end());
  CHECK(records(lmdb_source(lst)) == shards01);
  auto view = std::views::iota(0, 2) |
              std::views::transform([](int k) { return "train-" + std::to_string(k); });
  CHECK(records(lmdb_source(view)) == shards01);
  CHECK_THROWS_AS(lmdb_source(std::vector<std::string>{}), gpufeed::config_error);
}
