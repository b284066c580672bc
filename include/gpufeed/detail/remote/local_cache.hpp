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
// Integrity: the CRCs of a block's header are checked when a process opens its file, those of
// the pages a read touches on every read (local_cache_block.hpp); a block that fails is dropped
// and fetched again, its bytes never delivered. Files are not fsync'ed: after a power loss a
// torn block fails its checksum.
// Failures of the cache itself (a full disk, a file removed by hand) never fail a read: the
// bytes come from the remote object instead and store_failures counts the writes lost.
//
// Eviction: least recently used first, but never a block of an object this process is reading;
// once those fill the budget, new blocks are declined (local_cache_admission.hpp says why).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <charconv>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/remote/local_cache_admission.hpp"
#include "gpufeed/detail/remote/local_cache_block.hpp"
#include "gpufeed/detail/remote/local_cache_config.hpp"
#include "gpufeed/detail/remote/local_cache_handles.hpp"
#include "gpufeed/detail/remote/local_cache_index.hpp"

namespace gpufeed::detail::remote {

class local_cache {
 public:
  enum class found : unsigned char { hit, absent, corrupt };

  // Opens (creating) the cache at c.directory: io_error naming it when it cannot be made. A
  // directory holding more than c.max_bytes (filled under a larger budget) is trimmed to it.
  explicit local_cache(cache_config c)
      : config_(std::move(c)), index_(config_.directory, config_.max_bytes, counters_) {
    const cache_index::held h(index_);
    (void)index_.make_room(h, 0);
    index_.remove_stale_temporaries();
  }

  [[nodiscard]] const cache_config& config() const noexcept { return config_; }
  [[nodiscard]] cache_stats stats() const noexcept { return counters_.snapshot(); }
  [[nodiscard]] cache_counters& counters() noexcept { return counters_; }

  // Drops the blocks of every other version of key.url (the object changed).
  void forget_other_versions(const cache_key& key) const noexcept {
    const cache_index::held h(index_);
    index_.drop_other_versions(h, index_.root() / "objects" / key.url, key.version);
  }

  // The file of block `block`, named by its size of block too (processes that share the
  // directory with other block sizes keep apart blocks whose index and length coincide) and by
  // its format ("c2": local_cache_block.hpp's format 2; format 1's files, "<k>k.blk", are never
  // opened by this one and age out by LRU).
  [[nodiscard]] std::filesystem::path block_path(const cache_key& key, std::uint64_t block) const {
    std::string s;
    name_block(key, block, s);
    return s;
  }

  // Reads n bytes from byte `at` of block `block` (`length` bytes, of an object of
  // `object_size`) into dst when the cache holds it intact: hit; absent; corrupt (the block was
  // dropped: fetch it again). Only hit delivers dst; corrupt may have written bytes there that
  // failed their check (the reader's fetch overwrites them).
  //
  // The pages are read with one preadv: those whole within [at, at + n) straight into dst,
  // the first and last when they are not into a buffer on the stack (their part in range then
  // copied to dst), and checked where they landed: at most two pages copied besides the
  // kernel's copy.
  found read(const cache_key& key, std::uint64_t block, std::uint64_t object_size,
             std::uint32_t length, std::size_t at, void* dst, std::size_t n) const noexcept {
    try {
      thread_local std::string path;  // no allocation a read once this thread's has room
      name_block(key, block, path);
      std::shared_ptr<open_block> b = handles_.find(path);
      if (!b) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return found::absent;
        b = std::make_shared<open_block>();
        b->fd = fd;
        alignas(64) std::byte head[cache_header_bytes];
        if (!full_preadv(fd, {iovec{head, cache_header_bytes}, iovec{}, iovec{}}, 0) ||
            !b->header.parse(std::span(head, cache_header_bytes), object_size, block, length))
          return damaged(path, *b);
        handles_.keep(path, b);
      }
      if (at > length || n > length - at) return damaged(path, *b);
      if (n == 0) return found::hit;
      constexpr std::size_t p = cache_page_bytes;
      auto* out = static_cast<std::byte*>(dst);
      const std::size_t end = at + n, first = at / p, last = (end - 1) / p;
      const auto page_end = [&](std::size_t j) { return std::min<std::size_t>(length, j * p + p); };
      const bool head_apart = at != first * p || page_end(first) > end;
      const bool tail_apart = last != first && page_end(last) > end;
      alignas(64) std::byte edges[2 * p];
      const std::span<std::byte> head(edges, head_apart ? page_end(first) - first * p : 0);
      const std::span<std::byte> tail(edges + p, tail_apart ? page_end(last) - last * p : 0);
      const std::size_t body_from = head_apart ? page_end(first) : at;
      const std::size_t body_to = tail_apart ? last * p : end;
      const std::span<std::byte> body(out + (body_from - at),
                                      body_to > body_from ? body_to - body_from : 0);
      if (!full_preadv(b->fd,
                       {iovec{head.data(), head.size()}, iovec{body.data(), body.size()},
                        iovec{tail.data(), tail.size()}},
                       cache_header_bytes + first * p) ||
          !b->header.pages_intact(first, head, body, tail))
        return damaged(path, *b);
      if (head_apart)
        std::memcpy(out, head.data() + (at - first * p), std::min(end, page_end(first)) - at);
      if (tail_apart) std::memcpy(out + (last * p - at), tail.data(), end - last * p);
      mark_used(*b);
      counters_.add(cache_counters::hits);
      counters_.add(cache_counters::bytes_local, n);
      return found::hit;
    } catch (...) {  // no memory for a path: read it remotely
      return found::absent;
    }
  }

  // True when the cache has a file for every block that bytes [offset, offset + n) of the
  // object (of `object_size` bytes) lie in: advice (a block may be evicted or fail its check
  // before it is read), for readers that fetch ahead what the cache lacks.
  [[nodiscard]] bool holds(const cache_key& key, std::uint64_t object_size, std::uint64_t offset,
                           std::uint64_t n) const noexcept {
    if (n == 0 || offset >= object_size) return false;
    try {
      const std::uint64_t last = (std::min(object_size, offset + n) - 1) / config_.block_bytes;
      for (std::uint64_t k = offset / config_.block_bytes; k <= last; ++k) {
        thread_local std::string path;
        name_block(key, k, path);
        if (handles_.find(path)) continue;
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) return false;
      }
      return true;
    } catch (...) {
      return false;
    }
  }

  // Stores block `block` (its bytes `data`) of the object, making room first: true when it is
  // stored (or another process stored it meanwhile). False when blocks of objects being read
  // fill the budget (declined: counted, and admits() is false for a while) or the write failed
  // (store_failures); the bytes were delivered anyway.
  bool store(const cache_key& key, std::uint64_t block, std::uint64_t object_size,
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
        return true;
      }
      std::vector<std::filesystem::path> evicted;
      const std::uint64_t used = index_.make_room(
          h, image.size(), &evicted,
          [this](const std::filesystem::path& folder) { return admission_.kept(folder.native()); });
      for (const auto& e : evicted) handles_.forget(e.native());
      if (used + image.size() > config_.max_bytes) {
        (void)::unlink(tmp.c_str());
        counters_.add(cache_counters::declined);
        admission_.declined();
        return false;
      }
      std::error_code ec;
      std::filesystem::create_directories(path.parent_path(), ec);
      index_.set_usage(h, used + image.size());  // before the block is visible: see the index
      if (ec || ::rename(tmp.c_str(), path.c_str()) != 0) {
        index_.set_usage(h, used);
        return failed(tmp);
      }
      admission_.stored();
      return true;
    } catch (...) {
      return failed(tmp);
    }
  }

  // Whether a block fetched now may be stored (cache_admission::admits): readers fetch only the
  // bytes they need while it is false.
  [[nodiscard]] bool admits() const noexcept { return admission_.admits(); }
  // Marks the object `key` names as being read by one more reader of this process (undone by
  // done_reading): its blocks are never evicted by this process's stores.
  void reading(const cache_key& key) { admission_.reading(version_folder(key)); }
  void done_reading(const cache_key& key) noexcept {
    try {
      admission_.done_reading(version_folder(key));
    } catch (...) {  // no memory for the name: the object stays kept while this cache lives
    }
  }

  // A block fetched from the remote object (stored or not).
  void count_fetch(std::uint64_t bytes) noexcept {
    counters_.add(cache_counters::misses);
    counters_.add(cache_counters::bytes_fetched, bytes);
  }

 private:
  bool failed(const std::filesystem::path& tmp) noexcept {
    if (!tmp.empty()) (void)::unlink(tmp.c_str());
    counters_.add(cache_counters::store_failures);
    return false;
  }
  [[nodiscard]] std::string version_folder(const cache_key& key) const {
    return objects_ + '/' + key.url + '/' + key.version;
  }
  // A block that failed a check: closed, dropped (when its name is still this file), counted.
  found damaged(const std::string& path, const open_block& b) const noexcept {
    handles_.forget(path);
    try {
      const std::filesystem::path named(path);
      const cache_index::held h(index_);
      index_.drop(h, named, b.fd);
    } catch (...) {  // no memory for the path: left in place, found damaged again next time
    }
    counters_.add(cache_counters::corrupt);
    return found::corrupt;
  }
  // Marks the block used now, for eviction (its modification time), unless this process marked
  // it in the last second: LRU to the second, without an inode update on every read.
  static void mark_used(open_block& b) noexcept {
    timespec now{};
    if (::clock_gettime(CLOCK_REALTIME_COARSE, &now) != 0) return;
    std::int64_t last = b.marked_s.load(std::memory_order_relaxed);
    if (now.tv_sec - last < 1 ||
        !b.marked_s.compare_exchange_strong(last, now.tv_sec, std::memory_order_relaxed))
      return;
    (void)::futimens(b.fd, nullptr);
  }
  // The path of block `block`'s file into `out` (block_path's text, built in place: a cached
  // read names its block without allocating).
  void name_block(const cache_key& key, std::uint64_t block, std::string& out) const {
    out.assign(objects_);
    out += '/';
    out += key.url;
    out += '/';
    out += key.version;
    out += '/';
    char digits[48];
    const auto r = std::to_chars(digits, digits + sizeof digits, block);
    out.append(digits, r.ptr);
    out += '-';
    out += kib_suffix_;
  }
  // Reads the three parts' bytes (empty ones skipped) from byte `at` on, whole.
  static bool full_preadv(int fd, std::array<iovec, 3> parts, std::uint64_t at) noexcept {
    std::size_t k = 0;
    for (;;) {
      while (k < parts.size() && parts[k].iov_len == 0) ++k;
      if (k == parts.size()) return true;
      const ssize_t r = ::preadv(fd, parts.data() + k, static_cast<int>(parts.size() - k),
                                 static_cast<off_t>(at));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      at += static_cast<std::uint64_t>(r);
      for (auto left = static_cast<std::size_t>(r); left > 0;) {
        const std::size_t step = std::min(left, parts[k].iov_len);
        parts[k].iov_base = static_cast<std::byte*>(parts[k].iov_base) + step;
        parts[k].iov_len -= step;
        left -= step;
        if (parts[k].iov_len == 0) ++k;
      }
    }
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
  std::string objects_ = (index_.root() / "objects").string();
  std::string kib_suffix_ = std::to_string(config_.block_bytes >> 10) + "k.c2.blk";
  mutable open_blocks handles_{64};
  std::atomic<std::uint64_t> next_tmp_{0};
  cache_admission admission_;
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
