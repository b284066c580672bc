// gpufeed — the node-local cache's settings and keys (local_cache.hpp): the directory, budget
// and block size from hdf5_options or the environment, and what a block is keyed by (hashes of
// the URL without credentials, of the object's version, and the block's index).
#pragma once

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "gpufeed/detail/remote/digest.hpp"
#include "gpufeed/detail/remote/local_cache_block.hpp"
#include "gpufeed/detail/remote/url.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::remote {

inline constexpr std::size_t default_cache_block_bytes = std::size_t{4} << 20;

struct cache_config {
  std::filesystem::path directory;
  std::uint64_t max_bytes = 0;  // the budget: bytes of block files (headers included)
  std::size_t block_bytes = default_cache_block_bytes;
};

// "1073741824", "512M", "64G", "2T" (binary multiples, K M G T, either case): the byte count,
// or nullopt when `s` is not one.
[[nodiscard]] inline std::optional<std::uint64_t> parse_byte_count(const std::string& s) {
  std::size_t i = 0;
  std::uint64_t n = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (n > (~std::uint64_t{0} - 9) / 10) return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(s[i] - '0');
  }
  if (i == 0) return std::nullopt;
  if (i == s.size()) return n;
  if (i + 1 != s.size()) return std::nullopt;
  const char* units = "KMGT";
  const char* u = std::strchr(units, s[i] & ~0x20);
  if (!u || !*u) return std::nullopt;
  const unsigned shift = 10u * static_cast<unsigned>(u - units + 1);
  if (n > (~std::uint64_t{0} >> shift)) return std::nullopt;
  return n << shift;
}

// The cache remote shards are read through: `directory` and `max_bytes` as given; where
// `directory` is empty, GPUFEED_REMOTE_CACHE_DIR and GPUFEED_REMOTE_CACHE_BYTES; none when
// neither names a directory. config_error for a directory without a budget, a malformed
// GPUFEED_REMOTE_CACHE_BYTES, a block size that is not a power of two in [64 KiB, 8 MiB] (at
// most cache_max_pages pages, local_cache_block.hpp), or a budget smaller than four blocks.
[[nodiscard]] inline std::optional<cache_config> resolve_cache_config(
    const std::filesystem::path& directory, std::uint64_t max_bytes, std::size_t block_bytes) {
  cache_config c;
  c.directory = directory;
  c.max_bytes = max_bytes;
  c.block_bytes = block_bytes;
  if (c.directory.empty()) {
    const char* d = std::getenv("GPUFEED_REMOTE_CACHE_DIR");
    if (!d || !*d) return std::nullopt;
    c.directory = d;
    if (const char* b = std::getenv("GPUFEED_REMOTE_CACHE_BYTES"); b && *b) {
      const auto n = parse_byte_count(b);
      if (!n)
        throw config_error("GPUFEED_REMOTE_CACHE_BYTES is not a byte count (\"" + std::string(b) +
                           "\"; e.g. 68719476736 or 64G)");
      c.max_bytes = *n;
    }
  }
  const std::string where = " (the remote cache at " + c.directory.string() + ")";
  if (c.max_bytes == 0)
    throw config_error("a remote cache needs a byte budget: hdf5_options::remote_cache.max_bytes "
                       "or GPUFEED_REMOTE_CACHE_BYTES" + where);
  if (c.block_bytes < (std::size_t{64} << 10) || c.block_bytes > cache_max_pages * cache_page_bytes ||
      (c.block_bytes & (c.block_bytes - 1)) != 0)
    throw config_error("remote cache block_bytes must be a power of two from 64 KiB to 8 MiB" +
                       where);
  if (c.max_bytes < 4 * (c.block_bytes + cache_header_bytes))
    throw config_error("a remote cache's budget must hold at least four blocks of " +
                       std::to_string(c.block_bytes) + " bytes" + where);
  c.directory = std::filesystem::absolute(c.directory).lexically_normal();
  return c;
}

// The URL a cached object is keyed by: `url` redacted (redact_url: no user or password, secret
// query values hidden), without the query parameters that change each time a URL is presigned
// (X-Amz-*, Expires, AWSAccessKeyId, and the secret ones), so a re-signed URL finds the blocks
// its object left; the other parameters stay (two objects that differ by one are two objects).
[[nodiscard]] inline std::string cache_key_url(const std::string& url) {
  const std::string r = redact_url(url);
  const std::size_t q = r.find('?');
  if (q == std::string::npos) return r;
  std::string out = r.substr(0, q), sep = "?";
  for (std::size_t from = q + 1; from <= r.size();) {
    const std::size_t amp = std::min(r.find('&', from), r.size());
    const std::string param = r.substr(from, amp - from);
    from = amp + 1;
    std::string name = param.substr(0, param.find('='));
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name.empty() || name.rfind("x-amz-", 0) == 0 || name == "expires" ||
        name == "awsaccesskeyid" || secret_parameter(name))
      continue;
    out += sep + param;
    sep = "&";
  }
  return out;
}

// Where one version of an object's blocks live (hashes, never the URL itself).
struct cache_key {
  std::string url;      // hex hash of the URL as shown
  std::string version;  // hex hash of the object's size and validator
};
[[nodiscard]] inline cache_key make_cache_key(const std::string& key_url,
                                              const std::string& validator, std::uint64_t size) {
  return {sha256_hex(key_url).substr(0, 32),
          sha256_hex(std::to_string(size) + "\n" + validator).substr(0, 32)};
}

}  // namespace gpufeed::detail::remote
