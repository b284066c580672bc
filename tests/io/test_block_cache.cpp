// io::block_cache (include/gpufeed/detail/io/block_cache.hpp) over the in-memory double: reads
// equal the inner source's bytes wherever they fall (inside the head, across block boundaries,
// the last short block), each block read once (one inner read a block: the requests a URL
// shard's open makes), the bound on kept bytes, and the inner source's failures and early end
// reported as its own, never zeros.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gpufeed/detail/io/block_cache.hpp"
#include "gpufeed/error.hpp"
#include "memory_bytes.hpp"

using gpufeed::detail::io::block_cache;
using gpufeed::detail::io::read_outcome;
using gpufeed::test::memory_bytes;

namespace {

std::vector<std::byte> bytes_of(std::size_t n) {
  std::vector<std::byte> b(n);
  for (std::size_t k = 0; k < n; ++k) b[k] = static_cast<std::byte>((k * 131 + 7) % 251);
  return b;
}

}  // namespace

TEST_CASE("block_cache: random reads equal the source, each block read once") {
  const auto data = bytes_of(10 * 1000 + 123);
  const memory_bytes inner(data, "inner");
  const block_cache c(inner, 1000, 3000);  // head: bytes 0..2999; then blocks of 1000
  CHECK(c.size() == data.size());
  CHECK(c.name() == "inner");
  std::mt19937_64 rng(5);
  for (int k = 0; k < 500; ++k) {
    const std::uint64_t at = rng() % data.size();
    const std::uint64_t most = std::min<std::uint64_t>(2500, data.size() - at);
    const std::size_t n = static_cast<std::size_t>(rng() % most) + 1;
    std::vector<std::byte> got(n);
    c.read_exact(got.data(), n, at);
    REQUIRE(std::equal(got.begin(), got.end(), data.begin() + static_cast<std::ptrdiff_t>(at)));
  }
  // The head, 7 whole blocks (3000..9999) and the last one of 123 bytes: 9 reads of the source.
  CHECK(c.block_reads() == 9);
  CHECK(inner.reads() == 9);
  // Past the end: the seam's early end, never zeros.
  std::byte b[4];
  CHECK(c.try_read(b, 4, data.size() - 2).why == read_outcome::stop::ended);
}

TEST_CASE("block_cache: kept bytes are bounded; reads go on past the bound") {
  const auto data = bytes_of(8000);
  const memory_bytes inner(data, "inner");
  const block_cache c(inner, 1000, 1000, 2500);  // at most two blocks kept
  std::byte b[10];
  for (int round = 0; round < 2; ++round)
    for (std::uint64_t at = 0; at < 8000; at += 1000) {
      c.read_exact(b, 10, at + 5);
      CHECK(b[0] == data[at + 5]);
    }
  CHECK(c.block_reads() == 16);  // none survives a full pass
  c.read_exact(b, 10, 7005);     // the last block read is still kept
  CHECK(c.block_reads() == 16);
}

TEST_CASE("block_cache: the inner source's failure and early end are reported as its own") {
  const auto data = bytes_of(5000);
  memory_bytes inner(data, "inner");
  const block_cache c(inner, 1000, 1000);
  inner.fail_with(EIO);
  std::byte b[10];
  const read_outcome o = c.try_read(b, 10, 100);
  CHECK(o.why == read_outcome::stop::failed);
  CHECK(o.err == EIO);
  CHECK(std::string(o.api) == "memory");
  CHECK_THROWS_AS(c.read_exact(b, 10, 100), gpufeed::io_error);
  inner.fail_with(0);
  inner.cut(2500);  // truncated after it was opened: block 2 ends at 2500
  c.read_exact(b, 10, 2000);
  const read_outcome e = c.try_read(b, 10, 2495);
  CHECK(e.why == read_outcome::stop::ended);
  CHECK(e.at == 2500);
}
