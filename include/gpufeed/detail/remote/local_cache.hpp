// gpufeed — a node-local disk cache of remote objects' bytes: a directory and a byte budget,
// shared by every process of the node that names the same directory (the ranks of a job), in
// fixed-size blocks of an object (block k holds bytes [k * block_bytes, (k + 1) * block_bytes)).
//
// A block is keyed by its object's URL (cache_key_url: no credential, no presigning parameter),
// the object's size and validator (ETag, else Last-Modified: an object that changed gets new
// keys, and its old blocks are dropped when it is opened) and the block's index; on disk by
// hashes of these (local_cache_index.hpp has the layout).
//
// Safety with several processes: a block is written to a temporary file and renamed into place
// (a reader finds a complete file or none; a writer that crashes leaves only a temporary file,
// removed later); the budget's count, renames, drops and evictions happen under one flock.
// Integrity: every read checks the CRCs of the block's header and of the pages it reads
// (local_cache_block.hpp); a block that fails is dropped and fetched again, its bytes never
// delivered. Files are not fsync'ed: after a power loss a torn block fails its checksum.
// Failures of the cache itself (a full disk, a file removed by hand) never fail a read: the
// bytes come from the remote object instead and store_failures counts the writes lost.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/remote/digest.hpp"
#include "gpufeed/detail/remote/local_cache_block.hpp"
#include "gpufeed/detail/remote/local_cache_index.hpp"
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

class local_cache {
 public:
  enum class found : unsigned char { hit, absent, corrupt };

  // Opens (creating) the cache at c.directory: io_error naming it when it cannot be made. A
  // directory holding more than c.max_bytes (filled under a larger budget) is trimmed to it.
  explicit local_cache(cache_config c)
      : config_(std::move(c)), index_(config_.directory, config_.max_bytes, counters_) {
    const cache_index::held h(index_);
    (void)index_.make_room(h, 0);
  }

  [[nodiscard]] const cache_config& config() const noexcept { return config_; }
  [[nodiscard]] cache_stats stats() const noexcept { return counters_.snapshot(); }
  [[nodiscard]] cache_counters& counters() noexcept { return counters_; }

  // Drops the blocks of every other version of key.url (the object changed).
  void forget_other_versions(const cache_key& key) const noexcept {
    const cache_index::held h(index_);
    index_.drop_other_versions(h, index_.root() / "objects" / key.url, key.version);
  }

  [[nodiscard]] std::filesystem::path block_path(const cache_key& key, std::uint64_t block) const {
    return index_.root() / "objects" / key.url / key.version / (std::to_string(block) + ".blk");
  }

  // Reads n bytes from byte `at` of block `block` (`length` bytes, of an object of
  // `object_size`) into dst when the cache holds it intact: hit; absent; corrupt (the block was
  // dropped: fetch it again). Only hit has written dst.
  found read(const cache_key& key, std::uint64_t block, std::uint64_t object_size,
             std::uint32_t length, std::size_t at, void* dst, std::size_t n) const noexcept {
    try {
      const std::filesystem::path path = block_path(key, block);
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return found::absent;
      const std::size_t first = at / cache_page_bytes;
      const std::size_t from = first * cache_page_bytes;
      const std::size_t to = std::min<std::size_t>(
          length, (at + n + cache_page_bytes - 1) / cache_page_bytes * cache_page_bytes);
      thread_local std::vector<std::byte> buf;
      buf.resize(cache_header_bytes + (to - from));
      cache_block_header header;
      const bool ok =
          full_pread(fd, buf.data(), cache_header_bytes, 0) &&
          header.parse(std::span(buf.data(), cache_header_bytes), object_size, block, length) &&
          full_pread(fd, buf.data() + cache_header_bytes, to - from, cache_header_bytes + from) &&
          header.pages_intact(std::span(buf.data() + cache_header_bytes, to - from), first);
      if (ok) {
        std::memcpy(dst, buf.data() + cache_header_bytes + (at - from), n);
        touch(fd);
        counters_.add(cache_counters::hits);
        counters_.add(cache_counters::bytes_local, n);
      } else {
        const cache_index::held h(index_);
        index_.drop(h, path, fd);
        counters_.add(cache_counters::corrupt);
      }
      ::close(fd);
      return ok ? found::hit : found::corrupt;
    } catch (...) {  // no memory for a path or the buffer: read it remotely
      return found::absent;
    }
  }

  // Stores block `block` (its bytes `data`) of the object, making room first; a failure to
  // write counts in store_failures and is otherwise ignored (the bytes were delivered anyway).
  void store(const cache_key& key, std::uint64_t block, std::uint64_t object_size,
             std::span<const std::byte> data) noexcept {
    std::filesystem::path tmp;
    try {
      const std::vector<std::byte> image = encode_cache_block(data, object_size, block);
      tmp = index_.root() / "tmp" /
            (key.url + "-" + key.version + "-" + std::to_string(block) + "-" +
             std::to_string(::getpid()) + "-" + std::to_string(next_tmp_++) + ".tmp");
      const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) return failed(tmp);
      const bool written = full_write(fd, image.data(), image.size());
      if (::close(fd) != 0 || !written) return failed(tmp);
      const std::filesystem::path path = block_path(key, block);
      const cache_index::held h(index_);
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0) {  // another process stored it meanwhile
        (void)::unlink(tmp.c_str());
        return;
      }
      const std::uint64_t used = index_.make_room(h, image.size());
      std::error_code ec;
      std::filesystem::create_directories(path.parent_path(), ec);
      index_.set_usage(h, used + image.size());  // before the block is visible: see the index
      if (ec || ::rename(tmp.c_str(), path.c_str()) != 0) {
        index_.set_usage(h, used);
        return failed(tmp);
      }
    } catch (...) {
      failed(tmp);
    }
  }

  // A block fetched from the remote object (stored or not).
  void count_fetch(std::uint64_t bytes) noexcept {
    counters_.add(cache_counters::misses);
    counters_.add(cache_counters::bytes_fetched, bytes);
  }

 private:
  void failed(const std::filesystem::path& tmp) noexcept {
    if (!tmp.empty()) (void)::unlink(tmp.c_str());
    counters_.add(cache_counters::store_failures);
  }
  // Marks the block used now, for eviction (its modification time), unless it was marked in the
  // last second: LRU to the second, without an inode update on every read.
  static void touch(int fd) noexcept {
    struct stat st {};
    timespec now{};
    if (::fstat(fd, &st) != 0 || ::clock_gettime(CLOCK_REALTIME, &now) != 0) return;
    if (now.tv_sec - st.st_mtim.tv_sec < 1) return;
    (void)::futimens(fd, nullptr);
  }
  static bool full_pread(int fd, std::byte* p, std::size_t n, std::uint64_t at) noexcept {
    while (n > 0) {
      const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(at));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      p += r;
      n -= static_cast<std::size_t>(r);
      at += static_cast<std::uint64_t>(r);
    }
    return true;
  }
  static bool full_write(int fd, const std::byte* p, std::size_t n) noexcept {
    while (n > 0) {
      const ssize_t r = ::write(fd, p, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      p += r;
      n -= static_cast<std::size_t>(r);
    }
    return true;
  }

  cache_config config_;
  mutable cache_counters counters_;
  cache_index index_;
  std::atomic<std::uint64_t> next_tmp_{0};
};

// The process's one local_cache for c.directory (every shard read through it shares its
// counters and its lock): made on first use with c's budget and block size, which later calls
// for the same directory do not change. io_error as local_cache's constructor.
[[nodiscard]] inline std::shared_ptr<local_cache> shared_local_cache(const cache_config& c) {
  static std::mutex m;
  static std::map<std::string, std::weak_ptr<local_cache>> caches;
  const std::lock_guard<std::mutex> lock(m);
  std::weak_ptr<local_cache>& slot = caches[c.directory.string()];
  if (auto p = slot.lock()) return p;
  auto p = std::make_shared<local_cache>(c);
  slot = p;
  return p;
}

}  // namespace gpufeed::detail::remote
