// gpufeed — bounded multi-producer / multi-consumer hand-off.
//
// The pipeline's stages hand batches to each other through these queues. Capacity is fixed at
// construction (storage is allocated once, never grows): a full queue makes producers wait, which
// is how backpressure, not allocation, absorbs bursts.
//
// Shutdown has two forms:
//   close()          no more pushes; consumers drain what is queued, then pop() returns nullopt.
//   a stop request   on the std::stop_token passed to push/pop: the waiting call returns at once
//                    (push -> false, pop -> nullopt) whatever is queued.
// The queue is a mutex and two condition variables: hand-offs happen per batch (thousands per
// second at most), far below where a lock-free ring would pay for its complexity.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <utility>
#include <vector>

#include "gpufeed/error.hpp"

namespace gpufeed {

template <class T>
class bounded_queue {
 public:
  explicit bounded_queue(std::size_t capacity) : slots_(capacity) {
    if (capacity == 0) throw config_error("bounded_queue capacity must be at least 1");
  }
  bounded_queue(const bounded_queue&) = delete;
  bounded_queue& operator=(const bounded_queue&) = delete;

  // Blocks while full. Returns false (and leaves value unconsumed) when the queue is closed or
  // stop is requested.
  bool push(T& value, std::stop_token stop = {}) {
    std::unique_lock lock(mutex_);
    if (!not_full_.wait(lock, stop, [&] { return closed_ || count_ < slots_.size(); }))
      return false;
    if (closed_) return false;
    emplace_locked(std::move(value));
    lock.unlock();
    not_empty_.notify_one();
    return true;
  }
  bool push(T&& value, std::stop_token stop = {}) { return push(value, stop); }

  // Pushes every item, in order, blocking while the queue is full; one lock and one wake-up per
  // stretch that fits, instead of one per item. False (the rest not pushed) when closed or
  // stopped.
  bool push_all(std::span<T> items, std::stop_token stop = {}) {
    std::size_t i = 0;
    while (i < items.size()) {
      std::unique_lock lock(mutex_);
      if (!not_full_.wait(lock, stop, [&] { return closed_ || count_ < slots_.size(); }))
        return false;
      if (closed_) return false;
      const std::size_t before = i;
      while (i < items.size() && count_ < slots_.size()) emplace_locked(std::move(items[i++]));
      lock.unlock();
      if (i - before == 1)
        not_empty_.notify_one();
      else
        not_empty_.notify_all();
    }
    return true;
  }

  // Never blocks. False when full or closed (value is then left untouched).
  bool try_push(T& value) {
    {
      std::lock_guard lock(mutex_);
      if (closed_ || count_ == slots_.size()) return false;
      emplace_locked(std::move(value));
    }
    not_empty_.notify_one();
    return true;
  }
  bool try_push(T&& value) { return try_push(value); }

  // Blocks while empty and open. nullopt once closed and drained, or on stop.
  std::optional<T> pop(std::stop_token stop = {}) {
    std::unique_lock lock(mutex_);
    if (!not_empty_.wait(lock, stop, [&] { return closed_ || count_ > 0; })) return std::nullopt;
    if (count_ == 0) return std::nullopt;  // closed and drained
    std::optional<T> out = take_locked();
    lock.unlock();
    not_full_.notify_one();
    return out;
  }

  std::optional<T> try_pop() {
    std::optional<T> out;
    {
      std::lock_guard lock(mutex_);
      if (count_ == 0) return std::nullopt;
      out = take_locked();
    }
    not_full_.notify_one();
    return out;
  }

  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  // Removes everything queued (e.g. on shutdown); returns how many items were dropped.
  std::size_t clear() {
    std::size_t n;
    {
      std::lock_guard lock(mutex_);
      n = count_;
      while (count_ > 0) take_locked();
    }
    not_full_.notify_all();
    return n;
  }

  [[nodiscard]] std::size_t capacity() const noexcept { return slots_.size(); }
  [[nodiscard]] std::size_t size() const {
    std::lock_guard lock(mutex_);
    return count_;
  }
  [[nodiscard]] bool closed() const {
    std::lock_guard lock(mutex_);
    return closed_;
  }
  // Highest occupancy seen since construction (telemetry: a queue that is always full means the
  // consumer is the bottleneck, always empty means the producers are).
  [[nodiscard]] std::size_t high_watermark() const {
    std::lock_guard lock(mutex_);
    return high_watermark_;
  }

 private:
  void emplace_locked(T&& v) {
    slots_[(head_ + count_) % slots_.size()].emplace(std::move(v));
    ++count_;
    if (count_ > high_watermark_) high_watermark_ = count_;
  }
  std::optional<T> take_locked() {
    std::optional<T> out(std::move(*slots_[head_]));
    slots_[head_].reset();
    head_ = (head_ + 1) % slots_.size();
    --count_;
    return out;
  }

  mutable std::mutex mutex_;
  std::condition_variable_any not_full_;
  std::condition_variable_any not_empty_;
  std::vector<std::optional<T>> slots_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  std::size_t high_watermark_ = 0;
  bool closed_ = false;
};

}  // namespace gpufeed
