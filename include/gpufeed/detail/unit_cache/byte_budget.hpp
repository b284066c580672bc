// gpufeed — the byte budget of the decoded-unit cache (shared_chunk_cache.hpp): the bytes it
// holds, their peak, and the spare buffers of forgotten chunks.
//
// Held bytes (decoding chunks and readers' decode scratch included) never exceed the budget:
// one atomic count for all stripes, raised by compare-and-swap only when the bytes fit
// (try_add). Buffers of forgotten chunks (shared_chunk_cache::forget_unused) stay held as
// spares, taken by the next decodes of their size (take_spare), freed first when room is needed
// otherwise (free_one_spare).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace gpufeed::detail::unit_cache {

// A chunk's buffer and size, out of the table: evicted, or spare (forget_unused).
struct spare_buffer {
  std::size_t size;
  std::unique_ptr<std::byte[]> bytes;
};

// Raises `a` to at least `v`.
inline void raise_to(std::atomic<std::size_t>& a, std::size_t v) noexcept {
  std::size_t now = a.load(std::memory_order_relaxed);
  while (now < v && !a.compare_exchange_weak(now, v)) {
  }
}

class byte_budget {
 public:
  explicit byte_budget(std::size_t budget) noexcept : budget_(budget) {}
  byte_budget(const byte_budget&) = delete;
  byte_budget& operator=(const byte_budget&) = delete;

  [[nodiscard]] std::size_t budget() const noexcept {
    return budget_.load(std::memory_order_relaxed);
  }
  // Grows (never shrinks) the budget: several loaders may share the source.
  void raise_budget(std::size_t bytes) noexcept { raise_to(budget_, bytes); }

  [[nodiscard]] std::size_t held() const noexcept { return held_.load(std::memory_order_acquire); }
  [[nodiscard]] std::size_t peak() const noexcept { return peak_.load(std::memory_order_relaxed); }

  // Adds `bytes` to the held count when they fit the budget.
  bool try_add(std::size_t bytes) noexcept {
    std::size_t h = held_.load(std::memory_order_acquire);
    while (h + bytes <= budget_.load(std::memory_order_relaxed)) {
      if (held_.compare_exchange_weak(h, h + bytes, std::memory_order_acq_rel)) {
        raise_to(peak_, h + bytes);
        return true;
      }
    }
    return false;
  }
  // Gives back `bytes` that try_add() added (or a spare kept).
  void sub(std::size_t bytes) noexcept { held_.fetch_sub(bytes, std::memory_order_acq_rel); }

  // Keeps buffer b, whose bytes are still held, as a spare for the next decode of its size.
  // Without room in the list the buffer is freed on return and its bytes no longer held.
  void keep_spare(spare_buffer b) noexcept {
    const std::size_t size = b.size;
    try {
      std::lock_guard lock(spare_mutex_);
      spare_.push_back(std::move(b));
      spare_count_.fetch_add(1, std::memory_order_relaxed);
    } catch (...) {
      sub(size);
    }
  }

  // A spare buffer of `bytes` into `reused` (true), if there is one; its bytes stay held.
  bool take_spare(std::size_t bytes, std::unique_ptr<std::byte[]>& reused) noexcept {
    if (!spare_count_.load(std::memory_order_relaxed)) return false;
    std::lock_guard lock(spare_mutex_);
    for (auto it = spare_.rbegin(); it != spare_.rend(); ++it) {
      if (it->size != bytes) continue;
      reused = std::move(it->bytes);
      *it = std::move(spare_.back());
      spare_.pop_back();
      spare_count_.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
    return false;
  }
  // Frees one spare buffer (true), if there is one, outside the lock.
  bool free_one_spare() noexcept {
    if (!spare_count_.load(std::memory_order_relaxed)) return false;
    std::unique_ptr<std::byte[]> victim;
    {
      std::lock_guard lock(spare_mutex_);
      if (spare_.empty()) return false;
      victim = std::move(spare_.back().bytes);
      sub(spare_.back().size);
      spare_.pop_back();
      spare_count_.fetch_sub(1, std::memory_order_relaxed);
    }
    return true;
  }

 private:
  std::atomic<std::size_t> budget_;
  std::atomic<std::size_t> held_{0}, peak_{0};
  std::mutex spare_mutex_;
  std::vector<spare_buffer> spare_;  // forgotten chunks' buffers, under spare_mutex_
  std::atomic<std::size_t> spare_count_{0};
};

}  // namespace gpufeed::detail::unit_cache
