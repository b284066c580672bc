// gpufeed — which blocks the node-local cache (local_cache.hpp) keeps when its budget is full:
// the objects this process is reading, whose blocks its stores never evict, and whether a
// block fetched now may be stored at all.
//
// Why: an epoch reads each block once, in an order that changes every epoch, so on data larger
// than the budget LRU would evict nearly every block before its next use and write each fetched
// block only to evict it. Keeping the blocks of the objects being read instead keeps a fixed
// part of the data, read locally every epoch. Once those fill the budget a store is declined,
// and admits() is false for a while (5 s, doubling to a minute while stores keep being
// declined), so readers fetch only the bytes they need rather than whole blocks that would not
// be kept. A store that succeeds, or an object no longer read, ends the wait.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace gpufeed::detail::remote {

class cache_admission {
 public:
  // A reader of the object whose blocks lie in version folder `folder` opened (reading) or
  // closed (done_reading); one call each per reader.
  void reading(const std::string& folder) {
    const std::lock_guard<std::mutex> g(m_);
    ++reading_[folder];
  }
  void done_reading(const std::string& folder) noexcept {
    try {
      const std::lock_guard<std::mutex> g(m_);
      const auto it = reading_.find(folder);
      if (it != reading_.end() && --it->second == 0) reading_.erase(it);
    } catch (...) {  // no memory for the lookup: the folder stays kept while the cache lives
    }
    retry_at_ns_.store(0, std::memory_order_relaxed);  // its blocks may make room now
  }
  // Whether the blocks in `folder` are kept (an object being read): never evicted.
  [[nodiscard]] bool kept(const std::string& folder) const noexcept {
    try {
      const std::lock_guard<std::mutex> g(m_);
      return reading_.contains(folder);
    } catch (...) {
      return true;
    }
  }

  // Whether a block fetched now may be stored (advice: the store decides).
  [[nodiscard]] bool admits() const noexcept {
    return steady_ns() >= retry_at_ns_.load(std::memory_order_relaxed);
  }
  // A store found no room besides kept blocks: admits() is false for the next wait.
  void declined() noexcept {
    constexpr std::int64_t first = 5'000'000'000, most = 60'000'000'000;
    const std::int64_t was = wait_ns_.load(std::memory_order_relaxed);
    const std::int64_t wait = was == 0 ? first : std::min(most, 2 * was);
    wait_ns_.store(wait, std::memory_order_relaxed);
    retry_at_ns_.store(steady_ns() + wait, std::memory_order_relaxed);
  }
  void stored() noexcept { wait_ns_.store(0, std::memory_order_relaxed); }

 private:
  [[nodiscard]] static std::int64_t steady_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  mutable std::mutex m_;
  std::map<std::string, std::size_t> reading_;  // version folders being read, and by how many
  std::atomic<std::int64_t> retry_at_ns_{0};    // admits() is false until then (steady clock)
  std::atomic<std::int64_t> wait_ns_{0};        // the last wait after a declined store; 0: none
};

}  // namespace gpufeed::detail::remote
