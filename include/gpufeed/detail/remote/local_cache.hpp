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

  // The file of block `block`, named by its size of block too: processes that share the
  // directory with other block sizes keep apart blocks whose index and length coincide.
  [[nodiscard]] std::filesystem::path block_path(const cache_key& key, std::uint64_t block) const {
    return index_.root() / "objects" / key.url / key.version /
           (std::to_string(block) + "-" + std::to_string(config_.block_bytes >> 10) + "k.blk");
  }

  // Reads n bytes from byte `at` of block `block` (`length` bytes, of an object of
  // `object_size`) into dst when the cache holds it intact: hit; absent; corrupt (the block was
  // dropped: fetch it again). Only hit has written dst.
  found read(const cache_key& key, std::uint64_t block, std::uint64_t object_size,
             std::uint32_t length, std::size_t at, void* dst, std::size_t n) const noexcept {
    try {
      const std::filesystem::path path = block_path(key, block);
      std::shared_ptr<open_block> b = handles_.find(path.native());
      if (!b) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return found::absent;
        b = std::make_shared<open_block>();
        b->fd = fd;
        std::byte* head = scratch(cache_header_bytes);
        if (!full_pread(fd, head, cache_header_bytes, 0) ||
            !b->header.parse(std::span(head, cache_header_bytes), object_size, block, length))
          return damaged(path, *b);
        handles_.keep(path.native(), b);
      }
      const std::size_t first = at / cache_page_bytes;
      const std::size_t from = first * cache_page_bytes;
      const std::size_t to = std::min<std::size_t>(
          length, (at + n + cache_page_bytes - 1) / cache_page_bytes * cache_page_bytes);
      std::byte* pages = scratch(to - from);
      if (!full_pread(b->fd, pages, to - from, cache_header_bytes + from) ||
          !b->header.pages_intact(std::span(pages, to - from), first))
        return damaged(path, *b);
      std::memcpy(dst, pages + (at - from), n);
      mark_used(*b);
      counters_.add(cache_counters::hits);
      counters_.add(cache_counters::bytes_local, n);
      return found::hit;
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
      std::vector<std::filesystem::path> evicted;
      const std::uint64_t used = index_.make_room(h, image.size(), &evicted);
      for (const auto& e : evicted) handles_.forget(e.native());
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
  // A block that failed a check: closed, dropped (when its name is still this file), counted.
  found damaged(const std::filesystem::path& path, const open_block& b) const noexcept {
    handles_.forget(path.native());
    const cache_index::held h(index_);
    index_.drop(h, path, b.fd);
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
  // This thread's buffer of at least n bytes (reused: a read's pages are read into it).
  static std::byte* scratch(std::size_t n) {
    thread_local std::unique_ptr<std::byte[]> buf;
    thread_local std::size_t size = 0;
    if (size < n) {
      buf.reset(new std::byte[n]);
      size = n;
    }
    return buf.get();
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
  mutable open_blocks handles_{64};
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
