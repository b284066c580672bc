// gpufeed — the node-local cache's shared bookkeeping (local_cache.hpp): the lock every
// process that uses one cache directory takes to change what the cache holds, the byte count
// of what it holds, and eviction of the least recently used blocks.
//
// Layout of a cache directory (version 1):
//   v1/index                      the lock file; its first 16 bytes: a magic and the bytes held
//   v1/objects/<url>/<version>/<block>-<KiB>k.c2.blk   one block a file (local_cache_block.hpp)
//   v1/tmp/                       blocks being written (renamed into objects/ when complete)
// <url> is a hash of the object's URL as errors show it (no user, password or query: never a
// credential), <version> a hash of its size and validator (ETag, else Last-Modified).
//
// The lock is flock(2) on the index, taken by one thread of a process at a time (a mutex: flock
// belongs to the open file, which the process's threads share). Under it a block is renamed into
// place, dropped, or evicted, and the count updated; blocks are read without it (a file is
// complete once it has its name, and one unlinked while open stays readable). The count is
// raised before a rename becomes visible, so a crash between the two over-counts (an eviction
// scan comes sooner and sets it right), never under-counts past the budget. A block's last use
// is its file's modification time (set on each read): eviction removes the oldest first.
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "gpufeed/error.hpp"

namespace gpufeed::detail::remote {

// What a node-local cache did, counted by every reading thread (a snapshot of relaxed counters).
struct cache_stats {
  std::uint64_t hits = 0;         // reads served from a cached block
  std::uint64_t misses = 0;       // blocks fetched from the remote object
  std::uint64_t bytes_local = 0;  // bytes delivered from cached blocks
  std::uint64_t bytes_fetched = 0;  // bytes fetched from the remote object (whole blocks)
  std::uint64_t corrupt = 0;      // cached blocks that failed a checksum: dropped, fetched again
  std::uint64_t evictions = 0;    // blocks evicted to stay within the budget
  std::uint64_t evicted_bytes = 0;
  std::uint64_t invalidated = 0;  // blocks dropped because their object changed (new ETag/size)
  std::uint64_t store_failures = 0;  // blocks that could not be written (the read still served)
  std::uint64_t declined = 0;  // blocks not stored: the budget is full of blocks being read

  // Adds another source's counters (a source's stats summed over its shards).
  cache_stats& operator+=(const cache_stats& o) noexcept {
    hits += o.hits;
    misses += o.misses;
    bytes_local += o.bytes_local;
    bytes_fetched += o.bytes_fetched;
    corrupt += o.corrupt;
    evictions += o.evictions;
    evicted_bytes += o.evicted_bytes;
    invalidated += o.invalidated;
    store_failures += o.store_failures;
    declined += o.declined;
    return *this;
  }
};

class cache_counters {
 public:
  enum field : unsigned { hits, misses, bytes_local, bytes_fetched, corrupt, evictions,
                          evicted_bytes, invalidated, store_failures, declined, count_ };
  void add(field f, std::uint64_t n = 1) noexcept { v_[f].fetch_add(n, std::memory_order_relaxed); }
  [[nodiscard]] cache_stats snapshot() const noexcept {
    auto g = [&](field f) { return v_[f].load(std::memory_order_relaxed); };
    return {g(hits), g(misses), g(bytes_local), g(bytes_fetched), g(corrupt), g(evictions),
            g(evicted_bytes), g(invalidated), g(store_failures), g(declined)};
  }

 private:
  std::atomic<std::uint64_t> v_[count_] = {};
};

class cache_index {
 public:
  // Opens (creating) the cache directory's index and folders: io_error naming the directory.
  cache_index(const std::filesystem::path& dir, std::uint64_t max_bytes, cache_counters& counters)
      : root_(dir / "v1"), max_(max_bytes), counters_(counters) {
    std::error_code ec;
    std::filesystem::create_directories(root_ / "objects", ec);
    if (!ec) std::filesystem::create_directories(root_ / "tmp", ec);
    if (ec)
      throw io_error("cannot create the remote cache directory",
                     os_call_context(dir.string(), "mkdir", ec));
    fd_ = ::open((root_ / "index").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw io_error("cannot open the remote cache's index",
                     os_call_context((root_ / "index").string(), "open", errno));
    pid_ = ::getpid();
  }
  cache_index(const cache_index&) = delete;
  cache_index& operator=(const cache_index&) = delete;
  ~cache_index() {
    if (fd_ >= 0) ::close(fd_);
  }

  [[nodiscard]] const std::filesystem::path& root() const noexcept { return root_; }

  // The lock, held for a scope (also by this process's other threads: the mutex).
  class held {
   public:
    explicit held(const cache_index& i) : i_(i), m_(i.m_) {
      i_.own_descriptor();
      while (::flock(i_.fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
    held(const held&) = delete;
    held& operator=(const held&) = delete;
    ~held() { (void)::flock(i_.fd_, LOCK_UN); }

   private:
    const cache_index& i_;
    std::lock_guard<std::mutex> m_;
  };

  // The bytes the cache holds (under the lock): the index's count, or a scan when it has none.
  [[nodiscard]] std::uint64_t usage(const held&) const noexcept {
    char b[16] = {};
    if (::pread(fd_, b, sizeof b, 0) == static_cast<ssize_t>(sizeof b) &&
        std::memcmp(b, magic, 8) == 0) {
      std::uint64_t n = 0;
      std::memcpy(&n, b + 8, 8);
      return n;
    }
    return scan().total;
  }
  void set_usage(const held&, std::uint64_t n) const noexcept {
    char b[16] = {};
    std::memcpy(b, magic, 8);
    std::memcpy(b + 8, &n, 8);
    (void)::pwrite(fd_, b, sizeof b, 0);
  }

  // Makes room for `incoming` bytes (under the lock): when the count says they do not fit,
  // scans the blocks and removes the least recently used until the cache holds at most nine
  // tenths of the budget less `incoming` (a margin, so a full cache scans once per tenth of its
  // budget written, not once per block). Blocks whose version folder `keep` names are never
  // removed (the objects this process reads: local_cache_admission.hpp says why). Returns the
  // new count, `incoming` not included (more than the budget allows when kept blocks fill it);
  // adds the files removed to `evicted` when given.
  std::uint64_t make_room(
      const held& h, std::uint64_t incoming, std::vector<std::filesystem::path>* evicted = nullptr,
      const std::function<bool(const std::filesystem::path&)>& keep = {}) const noexcept {
    std::uint64_t used = usage(h);
    if (used + incoming <= max_) return used;
    listing l = scan();
    std::sort(l.blocks.begin(), l.blocks.end(), [](const block_file& a, const block_file& b) {
      return a.used != b.used ? a.used < b.used : a.path < b.path;
    });
    const std::uint64_t low = max_ / 10 * 9;
    const std::uint64_t target = low > incoming ? low - incoming : 0;
    used = l.total;
    for (const block_file& b : l.blocks) {
      if (used <= target) break;
      if (keep && keep(b.path.parent_path())) continue;
      if (::unlink(b.path.c_str()) != 0) continue;
      used -= b.bytes;
      if (evicted) try {
          evicted->push_back(b.path);
        } catch (...) {
        }
      counters_.add(cache_counters::evictions);
      counters_.add(cache_counters::evicted_bytes, b.bytes);
      (void)::rmdir(b.path.parent_path().c_str());  // the version's folder, once empty
    }
    set_usage(h, used);
    return used;
  }

  // Removes every version of the object in `url_dir` but `keep` (under the lock): the object
  // changed, and its old blocks must never be read again.
  void drop_other_versions(const held& h, const std::filesystem::path& url_dir,
                           const std::string& keep) const noexcept {
    std::error_code ec;
    std::uint64_t dropped = 0, blocks = 0;
    for (std::filesystem::directory_iterator it(url_dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (it->path().filename() == keep) continue;
      for (std::filesystem::directory_iterator b(it->path(), ec), e; !ec && b != e; b.increment(ec)) {
        struct stat st {};
        if (::stat(b->path().c_str(), &st) == 0 && ::unlink(b->path().c_str()) == 0) {
          dropped += static_cast<std::uint64_t>(st.st_size);
          ++blocks;
        }
      }
      ec.clear();
      (void)::rmdir(it->path().c_str());
    }
    if (!blocks) return;
    counters_.add(cache_counters::invalidated, blocks);
    const std::uint64_t used = usage(h);
    set_usage(h, used > dropped ? used - dropped : 0);
  }

  // Removes the temporary files a crashed writer left (older than ten minutes: no live writer
  // takes that long for one block). At open and at each eviction scan.
  void remove_stale_temporaries() const noexcept {
    try {
      std::error_code ec;
      const auto now = ::time(nullptr);
      for (std::filesystem::directory_iterator it(root_ / "tmp", ec), end; !ec && it != end;
           it.increment(ec)) {
        struct stat st {};
        if (::stat(it->path().c_str(), &st) == 0 && now - st.st_mtim.tv_sec > 600)
          (void)::unlink(it->path().c_str());
      }
    } catch (...) {
    }
  }

  // Unlinks the block file at `path` when it is still the file `fd` has open (under the lock).
  void drop(const held& h, const std::filesystem::path& path, int fd) const noexcept {
    struct stat open_st {}, named_st {};
    if (::fstat(fd, &open_st) != 0 || ::stat(path.c_str(), &named_st) != 0) return;
    if (open_st.st_dev != named_st.st_dev || open_st.st_ino != named_st.st_ino) return;
    if (::unlink(path.c_str()) != 0) return;
    const std::uint64_t used = usage(h), n = static_cast<std::uint64_t>(named_st.st_size);
    set_usage(h, used > n ? used - n : 0);
  }

 private:
  static constexpr char magic[8] = {'g', 'f', 'c', 'i', 'd', 'x', '1', '\0'};

  // A process forked from the one that opened the index shares its open file, and with it the
  // flock (it belongs to the open file): the child opens the index again, so the lock keeps the
  // two apart (under the mutex).
  void own_descriptor() const noexcept {
    if (pid_ == ::getpid()) return;
    const int fd = ::open((root_ / "index").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;  // no lock between the two then; blocks stay whole (rename, CRCs)
    ::close(fd_);
    fd_ = fd;
    pid_ = ::getpid();
  }

  struct block_file {
    std::filesystem::path path;
    std::uint64_t bytes = 0;
    std::int64_t used = 0;  // modification time, nanoseconds
  };
  struct listing {
    std::vector<block_file> blocks;
    std::uint64_t total = 0;
  };

  // Every block file, with its size and last use; removes temporary files a crashed writer left
  // (remove_stale_temporaries).
  listing scan() const noexcept {
    listing l;
    try {
      std::error_code ec;
      for (std::filesystem::recursive_directory_iterator it(root_ / "objects", ec), end;
           !ec && it != end; it.increment(ec)) {
        if (it->path().extension() != ".blk") continue;
        struct stat st {};
        if (::stat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        const auto bytes = static_cast<std::uint64_t>(st.st_size);
        l.blocks.push_back({it->path(), bytes,
                            std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec});
        l.total += bytes;
      }
      remove_stale_temporaries();
    } catch (...) {  // out of memory for the listing: what was listed so far
    }
    return l;
  }

  std::filesystem::path root_;
  std::uint64_t max_;
  cache_counters& counters_;
  mutable int fd_ = -1;
  mutable pid_t pid_ = 0;  // the process fd_ was opened by
  mutable std::mutex m_;
};

}  // namespace gpufeed::detail::remote
