// gpufeed — the block files of the node-local cache a process keeps open (local_cache.hpp), so a
// read of a cached block is one preadv of the pages it needs and their checksums, not an open, a
// header read and a close each time.
//
// At most `max` files open per process (local_cache keeps 64: a block_shuffled window's blocks;
// the least recently used is closed first), each with its header as checked when opened (a
// file's header never changes: a block is replaced by a new file, never rewritten). A file another process evicts or drops meanwhile stays readable, with the
// same bytes, through the open descriptor until it is closed here: the disk space of up to `max`
// such files is freed late. A read that finds a file damaged forgets it (forget()).
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "gpufeed/detail/remote/local_cache_block.hpp"

namespace gpufeed::detail::remote {

// An open block file and its checked header, shared by the reads that use it at once.
struct open_block {
  int fd = -1;
  cache_block_header header;
  std::atomic<std::int64_t> marked_s{0};  // when its use was last marked (seconds)
  open_block() = default;
  open_block(const open_block&) = delete;
  open_block& operator=(const open_block&) = delete;
  ~open_block() {
    if (fd >= 0) ::close(fd);
  }
};

class open_blocks {
 public:
  explicit open_blocks(std::size_t max) : max_(max) {}

  // The open file of the block at `path`, or null.
  [[nodiscard]] std::shared_ptr<open_block> find(const std::string& path) noexcept {
    const std::lock_guard<std::mutex> lock(m_);
    const auto it = map_.find(path);
    if (it == map_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }

  // Keeps `b` open for `path` (replacing what was kept for it), closing the least recently used
  // past the bound (each once no read uses it).
  void keep(const std::string& path, std::shared_ptr<open_block> b) noexcept {
    try {
      const std::lock_guard<std::mutex> lock(m_);
      if (const auto it = map_.find(path); it != map_.end()) {
        lru_.erase(it->second);
        map_.erase(it);
      }
      lru_.emplace_front(path, std::move(b));
      map_[path] = lru_.begin();
      while (lru_.size() > max_) {
        map_.erase(lru_.back().first);
        lru_.pop_back();
      }
    } catch (...) {  // no memory to keep it: the file closes when its read ends
    }
  }

  // Closes the file kept for `path` (once no read uses it): it was found damaged, or evicted.
  void forget(const std::string& path) noexcept {
    const std::lock_guard<std::mutex> lock(m_);
    if (const auto it = map_.find(path); it != map_.end()) {
      lru_.erase(it->second);
      map_.erase(it);
    }
  }

 private:
  using entry = std::pair<std::string, std::shared_ptr<open_block>>;
  std::size_t max_;
  std::mutex m_;
  std::list<entry> lru_;
  std::unordered_map<std::string, std::list<entry>::iterator> map_;
};

}  // namespace gpufeed::detail::remote
