// gpufeed::detail::record_space — one shard's opened state, opened on first use: the machinery
// hdf5_source and lmdb_source share for lazy opening.
//
// A rank reading many shards on one shared file system should open only the shards its
// partition touches. A slot holds what opening a shard built (its index, its record table) and
// opens it when first asked: thread-safe (one caller opens under the slot's mutex, the others
// wait for it), then published through an atomic pointer, so later calls cost one acquire load.
// An exception from the open goes to the caller that opened, and the next caller tries again:
// every caller gets the typed error naming the shard until an open succeeds.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>

namespace gpufeed::detail::record_space {

template <class T>
class lazy_slot {
 public:
  lazy_slot() = default;
  lazy_slot(const lazy_slot&) = delete;
  lazy_slot& operator=(const lazy_slot&) = delete;

  // The value, built by open() (returning std::unique_ptr<T>) on the first call that finds none.
  // `opened` is incremented once per successful open (a source's shards-opened count).
  template <class Open, class Counter>
  const T& get(Open&& open, Counter& opened) const {
    if (const T* v = ready_.load(std::memory_order_acquire)) return *v;
    std::lock_guard lock(mutex_);
    if (const T* v = ready_.load(std::memory_order_relaxed)) return *v;
    std::unique_ptr<T> v = std::forward<Open>(open)();
    value_ = std::move(v);
    ready_.store(value_.get(), std::memory_order_release);
    opened.fetch_add(1, std::memory_order_relaxed);
    return *value_;
  }

  // Publishes a value opened before the slot is shared (construction); replaces none.
  void set(std::unique_ptr<T> v) noexcept {
    value_ = std::move(v);
    ready_.store(value_.get(), std::memory_order_release);
  }

  [[nodiscard]] bool is_open() const noexcept {
    return ready_.load(std::memory_order_acquire) != nullptr;
  }
  // The value when opened, else null; never opens.
  [[nodiscard]] const T* if_open() const noexcept {
    return ready_.load(std::memory_order_acquire);
  }

 private:
  mutable std::mutex mutex_;                      // held while opening
  mutable std::atomic<const T*> ready_{nullptr};  // set once, after a successful open
  mutable std::unique_ptr<T> value_;
};

}  // namespace gpufeed::detail::record_space
