// Running out of descriptors while opening LMDB shards is an io_error that says "too many open
// files" and names the shard's data file (not just the failing call). Without the bound
// (max_open_shards = 0): with it, the least recently used shards close to make room
// (test_lmdb_open_bound.cpp).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "fd_count.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "lmdb_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;

TEST_CASE("lmdb: out of descriptors while opening shards: io_error 'too many open files'") {
  test::temp_dir dir("lmopenlimit");
  std::vector<fs::path> paths;
  for (int k = 0; k < 100; ++k) {
    paths.push_back(dir / ("s-" + std::to_string(1000 + k) + ".lmdb"));
    test::write_lmdb(paths.back(), {{test::key8(0), "v" + std::to_string(k)}});
  }
  const test::low_fd_limit limit(48);
  std::string e;
  SUBCASE("eager: at construction") {
    lmdb_options o;
    o.open = lmdb_options::open_kind::eager;
    o.max_open_shards = 0;
    e = test::error_of<io_error>([&] { const lmdb_source src(paths, o); });
  }
  SUBCASE("lazy: at first use") {
    lmdb_options o;
    o.max_open_shards = 0;
    bool built = false;
    e = test::error_of<io_error>([&] {  // the source closes before the error is examined
      const lmdb_source src(paths, o);
      built = true;  // a lazy source opens nothing yet
      std::vector<std::byte> buf(16);
      for (std::uint64_t i = 0; i < src.size(); ++i)
        src.read(i, std::span<std::byte>(buf.data(), src.record_size(i)));
    });
    CHECK(built);
  }
  CHECK(test::has(e, "too many open files"));
  CHECK(test::has(e, "data.mdb"));
}
