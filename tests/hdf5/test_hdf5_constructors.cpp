// hdf5_source's constructors take the shard lists users write: one name (const char*,
// std::string, path), a braced list of names (any mix of those), std::vector<std::string>,
// std::vector<path> and any other range of path-like values. Each spelling must compile (a
// braced list of two names once also matched path's iterator-pair constructor: ambiguous) and
// open exactly the shards named, in order.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <list>
#include <ranges>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

namespace {

using gpufeed::hdf5_source;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;

// Shard k holds k + 1 records of one int32 each, record j = 100 * k + j: the source's records
// then say which shards were opened and in which order.
void write_shard(const std::filesystem::path& path, int k) {
  h5_file f(path);
  dataset_spec s;
  s.file_type = H5T_NATIVE_INT32;
  s.mem_type = H5T_NATIVE_INT32;
  s.dims = {static_cast<hsize_t>(k + 1)};
  std::vector<std::int32_t> v(static_cast<std::size_t>(k + 1));
  for (int j = 0; j <= k; ++j) v[static_cast<std::size_t>(j)] = 100 * k + j;
  f.add(s, v);
}

std::vector<std::int32_t> records(const hdf5_source& src) {
  std::vector<std::int32_t> out(src.size());
  for (std::uint64_t i = 0; i < src.size(); ++i)
    src.read(i, std::as_writable_bytes(std::span(&out[i], 1)));
  return out;
}

const std::vector<std::int32_t> shard0 = {0};
const std::vector<std::int32_t> shards01 = {0, 100, 101};

// Runs in a directory holding train-00000.h5 and train-00001.h5, so names are relative, as in
// the README.
struct in_shard_dir {
  gpufeed::test::temp_dir dir{"h5ctor"};
  std::filesystem::path old = std::filesystem::current_path();
  in_shard_dir() {
    write_shard(dir / "train-00000.h5", 0);
    write_shard(dir / "train-00001.h5", 1);
    std::filesystem::current_path(dir.path());
  }
  ~in_shard_dir() { std::filesystem::current_path(old); }
};

}  // namespace

TEST_CASE("hdf5_source: the README's line, braced lists of names") {
  in_shard_dir here;
  {
    gpufeed::hdf5_source shards({"train-00000.h5", "train-00001.h5"});  // README, verbatim
    CHECK(records(shards) == shards01);
  }
  CHECK(records(hdf5_source({"train-00000.h5"})) == shard0);
  CHECK(records(hdf5_source({std::string("train-00000.h5"), std::string("train-00001.h5")})) ==
        shards01);
  CHECK(records(hdf5_source({std::filesystem::path("train-00000.h5"),
                             std::filesystem::path("train-00001.h5")})) == shards01);
  CHECK(records(hdf5_source({"train-00000.h5", std::string("train-00001.h5")})) == shards01);
  gpufeed::hdf5_options o;
  CHECK(records(hdf5_source({"train-00000.h5", "train-00001.h5"}, o)) == shards01);
  hdf5_source braced_init{"train-00001.h5", "train-00000.h5"};
  CHECK(records(braced_init) == std::vector<std::int32_t>{100, 101, 0});
}

TEST_CASE("hdf5_source: one name as const char*, std::string or path") {
  in_shard_dir here;
  CHECK(records(hdf5_source("train-00000.h5")) == shard0);
  const std::string name = "train-00000.h5";
  CHECK(records(hdf5_source(name)) == shard0);
  const std::filesystem::path p = "train-00000.h5";
  CHECK(records(hdf5_source(p)) == shard0);
  CHECK(records(hdf5_source(p, gpufeed::hdf5_options{})) == shard0);
}

TEST_CASE("hdf5_source: vectors and other ranges of path-like values") {
  in_shard_dir here;
  const std::vector<std::string> names = {"train-00000.h5", "train-00001.h5"};
  CHECK(records(hdf5_source(names)) == shards01);
  CHECK(records(hdf5_source(std::vector<std::string>(names))) == shards01);
  const std::vector<std::filesystem::path> paths(names.begin(), names.end());
  CHECK(records(hdf5_source(paths)) == shards01);
  CHECK(records(hdf5_source(std::vector<std::filesystem::path>(paths))) == shards01);
  const std::array<const char*, 2> arr = {"train-00000.h5", "train-00001.h5"};
  CHECK(records(hdf5_source(arr)) == shards01);
  const std::list<std::string> lst(names.begin(), names.end());
  CHECK(records(hdf5_source(lst)) == shards01);
  auto view = std::views::iota(0, 2) | std::views::transform([](int k) {
                return "train-0000" + std::to_string(k) + ".h5";
              });
  CHECK(records(hdf5_source(view, gpufeed::hdf5_options{})) == shards01);
  CHECK_THROWS_AS(hdf5_source(std::vector<std::string>{}), gpufeed::config_error);
}

#ifndef GPUFEED_HAS_REMOTE
TEST_CASE("a URL shard without the remote component is a config_error saying what to link") {
  for (const char* url : {"http://127.0.0.1:1/a.h5", "https://example.invalid/a.h5",
                          "s3://bucket/a.h5", "HTTP://user:pw@host/a.h5?X-Amz-Signature=zz"}) {
    CAPTURE(url);
    try {
      hdf5_source src(url);
      FAIL("opened");
    } catch (const gpufeed::config_error& e) {
      const std::string m = e.what();
      CHECK(m.find("gpufeed::remote") != std::string::npos);
      CHECK(m.find("pw") == std::string::npos);
      CHECK(m.find("=zz") == std::string::npos);
    }
  }
}
#endif
