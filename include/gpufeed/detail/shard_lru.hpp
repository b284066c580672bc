// gpufeed::detail — a bound on the shards that hold open descriptors at once, shared by a source's
// readers: any number of shards reads under a process's descriptor limit (`ulimit -n`, often
// 1024), where keeping every opened shard's descriptor open would fail past it.
//
// A shard's index (what opening it learned) stays in memory; only its descriptors are closed and
// reopened on demand. A reader pins a shard for the span of a read (pin / unpin, or shard_pin):
// a pinned shard is never closed, so no descriptor, map or library handle is taken from under a
// read. Closing picks the least recently used unpinned shard, approximately (a clock sweep over
// the open shards, each with a referenced bit: pinning an open shard costs one compare-and-swap
// on that shard's word and takes no lock). When every open shard is pinned the bound is exceeded
// by those pins (at most one shard per reading thread) rather than waiting.
//
// Contract with the owner: reopen(k) is called with the lock held and shard k closed and
// unpinned; it opens shard k's descriptors or throws (its typed error reaches the pinning
// reader). close(k) is called with the lock held and shard k unpinned; it must not throw. A shard
// opened elsewhere (first open) is made known by adopt(k), after make_room() or inside
// open_first(). An open or reopen that fails for want of descriptors (other files of the process
// hold them) is tried once more after every unpinned shard is closed (retrying()).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpufeed/error.hpp"

namespace gpufeed::detail {

class shard_lru {
 public:
  // limit 0: no bound (descriptors stay open, as without the LRU).
  shard_lru(std::size_t shards, std::size_t limit, std::function<void(std::size_t)> reopen,
            std::function<void(std::size_t)> close)
      : limit_(limit), reopen_(std::move(reopen)), close_(std::move(close)) {
    entries_.reserve(shards);
    for (std::size_t k = 0; k < shards; ++k) entries_.push_back(std::make_unique<entry>());
  }
  shard_lru(const shard_lru&) = delete;
  shard_lru& operator=(const shard_lru&) = delete;

  [[nodiscard]] std::size_t limit() const noexcept { return limit_; }
  // Shards holding descriptors now.
  [[nodiscard]] std::size_t open_count() const {
    std::lock_guard lock(mutex_);
    return ring_.size();
  }

  // Closes unpinned shards until fewer than the limit are open (one more may open).
  void make_room() {
    if (limit_ == 0) return;
    std::lock_guard lock(mutex_);
    make_room_locked(limit_ - 1);
  }

  // Shard k was opened (its descriptors are open): counted, unpinned.
  void adopt(std::size_t k) {
    std::lock_guard lock(mutex_);
    entry& e = *entries_[k];
    if (!(e.word.load(std::memory_order_relaxed) & closed_bit)) return;
    ring_.push_back(k);
    e.referenced.store(true, std::memory_order_relaxed);
    e.word.store(0, std::memory_order_release);
  }

  // Pins shard k (adopted before), reopening it first when it was closed. Throws reopen's error.
  void pin(std::size_t k) {
    entry& e = *entries_[k];
    if (try_pin(e)) return;
    std::lock_guard lock(mutex_);
    std::uint32_t v = e.word.load(std::memory_order_acquire);
    if (!(v & closed_bit)) {  // reopened meanwhile (only the lock's holder clears closed_bit)
      e.word.fetch_add(1, std::memory_order_acquire);
      e.referenced.store(true, std::memory_order_relaxed);
      return;
    }
    if (limit_) make_room_locked(limit_ - 1);
    retrying([&] { reopen_(k); }, [&] { make_room_locked(0); });
    ring_.push_back(k);
    e.referenced.store(true, std::memory_order_relaxed);
    e.word.store(1, std::memory_order_release);  // open, pinned once
  }

  // Runs open() (a shard's first open, outside the lock: it may scan the shard) after making
  // room, retried as a reopen is (retrying()); returns what it returns. The caller adopts the
  // shard it opened.
  template <class Open>
  std::invoke_result_t<Open&> open_first(Open&& open) {
    make_room();
    return retrying(open, [&] { close_all(); });
  }

  // Pins shard k when it is open now; false (nothing pinned) when it is closed. Never opens.
  [[nodiscard]] bool pin_if_open(std::size_t k) noexcept { return try_pin(*entries_[k]); }

  void unpin(std::size_t k) noexcept {
    entries_[k]->word.fetch_sub(1, std::memory_order_release);
  }

  // Closes every unpinned shard (a source's destruction needs nothing of this).
  void close_all() {
    std::lock_guard lock(mutex_);
    make_room_locked(0);
  }

 private:
  static constexpr std::uint32_t closed_bit = 0x80000000u;
  struct entry {
    std::atomic<std::uint32_t> word{closed_bit};  // closed_bit | pins
    std::atomic<bool> referenced{false};          // used since the clock hand last passed
  };

  static bool try_pin(entry& e) noexcept {
    std::uint32_t v = e.word.load(std::memory_order_relaxed);
    while (!(v & closed_bit))
      if (e.word.compare_exchange_weak(v, v + 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        if (!e.referenced.load(std::memory_order_relaxed))
          e.referenced.store(true, std::memory_order_relaxed);
        return true;
      }
    return false;
  }

  // Runs open(); when it throws io_error or library_error and the bound is on, frees descriptors
  // (free(): closes every unpinned shard) and runs it once more, whose error is the caller's.
  // The first error is not inspected for EMFILE: under a descriptor limit a library may report
  // it as something else (HDF5's open fails without errno), and a check made while the
  // descriptors are still held would see the limit; after the shards are closed the second
  // attempt's error says what is wrong. Content errors (format_error, corrupt_error) are not
  // retried: they do not depend on descriptors.
  template <class Open, class Free>
  std::invoke_result_t<Open&> retrying(Open&& open, Free&& free) {
    if (limit_ == 0) return open();
    try {
      return open();
    } catch (const io_error&) {
    } catch (const library_error&) {
    }
    free();
    return open();
  }

  // Closes unpinned shards, least recently used first (clock), until at most `keep` are open or
  // every open one is pinned. The lock is held.
  void make_room_locked(std::size_t keep) noexcept {
    std::size_t misses = 0;  // consecutive shards passed over; two full turns: all pinned
    while (ring_.size() > keep && misses < 2 * ring_.size()) {
      if (hand_ >= ring_.size()) hand_ = 0;
      const std::size_t k = ring_[hand_];
      entry& e = *entries_[k];
      std::uint32_t zero = 0;
      if (e.referenced.exchange(false, std::memory_order_relaxed) ||
          !e.word.compare_exchange_strong(zero, closed_bit, std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
        ++hand_;
        ++misses;
        continue;
      }
      close_(k);
      ring_[hand_] = ring_.back();
      ring_.pop_back();
      misses = 0;
    }
  }

  std::size_t limit_;
  std::function<void(std::size_t)> reopen_, close_;
  std::vector<std::unique_ptr<entry>> entries_;
  mutable std::mutex mutex_;
  std::vector<std::size_t> ring_;  // open shards (the clock's circle); under mutex_
  std::size_t hand_ = 0;           // under mutex_
};

// Pins one shard of a shard_lru for its lifetime (nothing when lru is null).
class shard_pin {
 public:
  shard_pin(shard_lru* lru, std::size_t k) : lru_(lru), k_(k) {
    if (lru_) lru_->pin(k_);
  }
  shard_pin(const shard_pin&) = delete;
  shard_pin& operator=(const shard_pin&) = delete;
  ~shard_pin() {
    if (lru_) lru_->unpin(k_);
  }

 private:
  shard_lru* lru_;
  std::size_t k_;
};

// A reader's pin that stays on the shard it read last (LMDB's readers do the same): pinning per
// record costs two atomic operations on the shard's word, a cache line every worker reading that
// shard contends for. hold(k) moves the pin to shard k; release() drops it (a reader's idle()
// and destructor). The bound is then exceeded by at most one shard per reader, as with per-read
// pins. Movable; never throws on release.
class held_pin {
 public:
  held_pin() noexcept = default;
  held_pin(const held_pin&) = delete;
  held_pin& operator=(const held_pin&) = delete;
  held_pin(held_pin&& o) noexcept : lru_(std::exchange(o.lru_, nullptr)), k_(o.k_) {}
  held_pin& operator=(held_pin&& o) noexcept {
    if (this != &o) {
      release();
      lru_ = std::exchange(o.lru_, nullptr);
      k_ = o.k_;
    }
    return *this;
  }
  ~held_pin() { release(); }

  // True when shard k is pinned by this holder (never with a null lru: nothing to pin).
  [[nodiscard]] bool holds(std::size_t k) const noexcept { return lru_ && k_ == k; }
  // Drops the pin held before, then pins shard k of `lru` (reopening it when closed, which may
  // close the shard let go: throws as shard_lru::pin, holding nothing then). A null lru pins
  // nothing.
  void hold(shard_lru* lru, std::size_t k) {
    release();
    if (lru) lru->pin(k);
    lru_ = lru;
    k_ = k;
  }
  void release() noexcept {
    if (lru_) lru_->unpin(k_);
    lru_ = nullptr;
  }

 private:
  shard_lru* lru_ = nullptr;
  std::size_t k_ = 0;
};

}  // namespace gpufeed::detail
