// gpufeed — the decode scratch of a source's readers (a chunk's stored bytes and its filters'
// intermediate outputs), counted in the decoded-chunk budget beside the cached chunks
// (shared_chunk_cache.hpp), so that N readers decoding chunks of S bytes never hold N x S beyond
// the budget.
//
// Each reader owns one scratch_account: three buffers that keep their allocation between decodes
// (a decode into memory the allocator just handed back faults in fresh pages), whose capacities
// are counted in the cache's held bytes. Before a decode the reader locks its account and sizes
// the buffers for the chunk; growing them reserves the bytes first (shared_chunk_cache::
// reserve_scratch: free room, then spare buffers, spent chunks and other readers' idle
// scratch). An idle account (its mutex free) may be emptied by any reader that needs room: under
// the registry's lock, by try_lock only, so no reader ever blocks on another's account.
//
// No deadlock: nobody waits for budget. A reader that finds no room (every byte held by chunks
// still to be read, pinned chunks, or scratch in use) decodes outside the budget instead, one at
// a time (the cache's scratch overflow lock, held only for a decode, which waits for nothing),
// its buffers freed right after: decoded memory stays within the budget plus one chunk (the
// cache's overflow buffer) and one chunk's scratch, whatever the number of readers. Waiting for
// room was tried and rejected: a reader stalled while holding its band's chunks let the others
// run ahead and evict chunks still to be read, costing decodes again.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "gpufeed/detail/byte_buffer.hpp"

namespace gpufeed::detail::unit_cache {

// One reader's decode buffers. counted: the bytes of them held in the budget (their capacities,
// or 0 while they are outside it).
struct scratch_account {
  std::mutex mutex;  // its reader holds it while it sizes or uses the buffers
  byte_buffer stored, a, b;
  std::size_t counted = 0;

  [[nodiscard]] std::size_t capacity() const noexcept {
    return stored.capacity() + a.capacity() + b.capacity();
  }
  // Frees the buffers; returns the bytes they had counted.
  std::size_t free_buffers() noexcept {
    stored.release();
    a.release();
    b.release();
    return std::exchange(counted, 0);
  }
};

// The accounts of one cache's readers.
class scratch_registry {
 public:
  void add(scratch_account* a) {
    std::lock_guard lock(mutex_);
    accounts_.push_back(a);
  }
  void remove(scratch_account* a) noexcept {
    std::lock_guard lock(mutex_);
    accounts_.erase(std::remove(accounts_.begin(), accounts_.end(), a), accounts_.end());
  }

  // Empties one idle account other than `self` that counts bytes; returns those bytes (0: none
  // found). The caller gives them back to the budget.
  std::size_t free_idle(const scratch_account* self) noexcept {
    std::lock_guard lock(mutex_);
    const std::size_t n = accounts_.size();
    for (std::size_t i = 0; i < n; ++i) {
      scratch_account* a = accounts_[(next_ + i) % n];
      if (a == self) continue;
      std::unique_lock held(a->mutex, std::try_to_lock);
      if (!held.owns_lock() || a->counted == 0) continue;
      next_ = (next_ + i + 1) % n;
      return a->free_buffers();
    }
    return 0;
  }

  // Bytes the accounts count now, and the most they counted at once.
  void add_held(std::size_t bytes) noexcept {
    const std::size_t now = held_.fetch_add(bytes) + bytes;
    std::size_t p = peak_.load(std::memory_order_relaxed);
    while (p < now && !peak_.compare_exchange_weak(p, now)) {
    }
  }
  void sub_held(std::size_t bytes) noexcept { held_.fetch_sub(bytes); }
  [[nodiscard]] std::size_t peak() const noexcept { return peak_.load(std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  std::vector<scratch_account*> accounts_;  // under mutex_
  std::size_t next_ = 0;                    // where free_idle starts; under mutex_
  std::atomic<std::size_t> held_{0}, peak_{0};
};

}  // namespace gpufeed::detail::unit_cache
