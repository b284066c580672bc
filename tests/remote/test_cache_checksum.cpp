// The node-local cache's checksums (detail/remote/crc32c.hpp, local_cache_block.hpp): CRC-32C's
// standard value and the hardware path equal to the table's at every length and alignment;
// pages checked three at a time equal one by one; and a cached read, whose whole pages land in
// the reader's buffer and whose edge pages land apart, reports a block with a byte changed in
// any page the read touches as corrupt (dropped, its bytes never a hit), whatever the read's
// shape: within one page, across two, page-aligned or not, the block's short last page, the
// whole block. read_held (the reads that bypass remote units) delivers nothing of such a block.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpufeed/detail/remote/crc32c.hpp"
#include "gpufeed/detail/remote/local_cache_source.hpp"
#include "memory_bytes.hpp"
#include "test_util.hpp"

using namespace gpufeed::detail::remote;
namespace fs = std::filesystem;

namespace {

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
  std::vector<std::byte> b(n);
  std::mt19937 rng(seed);
  for (auto& x : b) x = static_cast<std::byte>(rng());
  return b;
}

void flip_byte(const fs::path& p, std::uint64_t at) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(c ^ 0x21));
}

}  // namespace

TEST_CASE("crc32c: standard value; hardware equals table; pages three at a time equal one") {
  CHECK(crc32c(0, "123456789", 9) == 0xe3069283u);
  CHECK(crc32c_portable(0, "123456789", 9) == 0xe3069283u);
  const auto data = random_bytes(3 * cache_page_bytes + 77, 1);
  for (std::size_t at = 0; at < 9; ++at)
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8},
                                std::size_t{63}, std::size_t{4096}, data.size() - 9}) {
      INFO("at " << at << " n " << n);
      CHECK(crc32c(0, data.data() + at, n) == crc32c_portable(0, data.data() + at, n));
      // continued: a then b equals a + b
      CHECK(crc32c(crc32c(0, data.data() + at, n / 2), data.data() + at + n / 2, n - n / 2) ==
            crc32c(0, data.data() + at, n));
    }
  const auto pages = random_bytes(7 * cache_page_bytes, 2);
  std::uint32_t got[7];
  crc32c_pages(pages.data(), cache_page_bytes, 7, got);
  for (std::size_t k = 0; k < 7; ++k)
    CHECK(got[k] == crc32c_portable(0, pages.data() + k * cache_page_bytes, cache_page_bytes));
  // Unequal lengths among three in a row: each still its own.
  const std::byte* page[4] = {pages.data(), pages.data() + 100, pages.data() + 200,
                              pages.data() + 300};
  const std::size_t bytes[4] = {500, 500, 499, 500};
  std::uint32_t each[4];
  crc32c_each(page, bytes, 4, each);
  for (std::size_t k = 0; k < 4; ++k) CHECK(each[k] == crc32c_portable(0, page[k], bytes[k]));
}

TEST_CASE("local cache: a byte changed in any page a read touches is caught, whatever its shape") {
  gpufeed::test::temp_dir dir("lcache-crc");
  constexpr std::size_t block = 64 * 1024, p = cache_page_bytes;
  const auto data = random_bytes(block + 5000, 3);  // block 1: 5000 bytes, one short page
  cache_config c;
  c.directory = dir.path();
  c.max_bytes = 64 * block;
  c.block_bytes = block;
  const auto object = [&] {
    return std::make_unique<gpufeed::test::memory_bytes>(data, "http://host/crc.h5");
  };
  struct shape {
    std::uint64_t block;
    std::size_t at, n;
  };
  const shape shapes[] = {{0, 0, block},         {0, 0, p},           {0, 100, 200},
                          {0, p - 10, 20},       {0, 3 * p, 2 * p},   {0, 100, 5 * p},
                          {0, 2 * p + 1, 4 * p}, {0, 0, 3 * p + 1},   {1, 0, 5000},
                          {1, 4000, 1000},       {1, 0, 4999}};
  for (const shape& s : shapes) {
    INFO("block " << s.block << " at " << s.at << " n " << s.n);
    const std::uint32_t length = s.block == 0 ? block : 5000;
    const std::size_t first = s.at / p, last = (s.at + s.n - 1) / p;
    for (std::size_t page = first; page <= last + 1; ++page) {  // last + 1: a page not read
      auto cache = std::make_shared<local_cache>(c);
      local_cache_source src(object(), "http://host/crc.h5", "etag:\"k\"", cache);
      std::vector<std::byte> got(s.n);
      src.read_exact(got.data(), got.size(), s.block * block + s.at);  // fetched, stored
      const fs::path path = cache->block_path(src.key(), s.block);
      REQUIRE(fs::exists(path));
      const bool touched = page <= last;
      const std::size_t byte = std::min<std::size_t>(page * p + 17, length - 1);
      if (page * p < length) flip_byte(path, cache_header_bytes + byte);
      std::fill(got.begin(), got.end(), std::byte{0});
      const auto f = cache->read(src.key(), s.block, data.size(), length, s.at, got.data(), s.n);
      if (touched) {
        CHECK(f == local_cache::found::corrupt);
        CHECK_FALSE(fs::exists(path));  // dropped
      } else {
        REQUIRE(f == local_cache::found::hit);
        CHECK(std::memcmp(got.data(), data.data() + s.block * block + s.at, s.n) == 0);
      }
      fs::remove_all(dir.path());
    }
  }
  // read_held: nothing of a damaged block, the block dropped; the intact one before it read.
  auto cache = std::make_shared<local_cache>(c);
  local_cache_source src(object(), "http://host/crc.h5", "etag:\"k\"", cache);
  std::vector<std::byte> all(data.size());
  src.read_exact(all.data(), all.size(), 0);
  flip_byte(cache->block_path(src.key(), 1), cache_header_bytes + 4000);
  std::vector<std::byte> got(data.size());
  CHECK(src.read_held(got.data(), got.size(), 0) == block);
  CHECK(std::memcmp(got.data(), data.data(), block) == 0);
  CHECK_FALSE(fs::exists(cache->block_path(src.key(), 1)));
  CHECK(src.stats().corrupt == 1);
  CHECK_FALSE(src.holds(0, data.size()));
  CHECK(src.holds(0, block));
}
