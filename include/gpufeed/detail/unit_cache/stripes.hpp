// gpufeed — the table of the decoded-unit cache (shared_chunk_cache.hpp): its stripes, their
// eviction lists, and the eviction rule.
//
// The table is split into stripes, each with its own mutex, table, eviction lists and condition
// variable; a chunk lives in the stripe of its group (the caller's contract: a key always comes
// with the same group; hdf5 readers pass the chunk's band, so one record's chunks share one
// lock). One mutex for the whole table bounded block_shuffled: a record read takes it twice, and
// 14 workers waited for it a tenth of their time (docs/design.md). Pinned and decoding chunks are
// on no eviction list and are never evicted; a ready chunk joins its stripe's spent or open list
// when its last pin goes.
//
// Eviction rule (the victim when room is needed):
//   1. a spent chunk: one that every record touching it has read since it was decoded (reads a
//      multiple of its users), from any stripe (each stripe's most recently released first). In
//      one epoch each record is read once, so a spent chunk is not needed again this epoch, and
//      the newest one's buffer, which the new chunk is decoded into, was read last and is the
//      likeliest still in the CPU's caches (faster than oldest first: docs/design.md, "HDF5
//      compressed chunks").
//   2. otherwise an unpinned chunk, each stripe's least recently used first.
// Hence: if the budget holds every chunk that is open at once (decoded, with records still to
// read this epoch) plus one per reader decoding — in block_shuffled order, the window's units plus
// the planner's look-ahead (automatic_budget.hpp) — room is always found among spent chunks, an
// open chunk is never evicted, and each chunk is decoded at most once per epoch per rank — also
// when one worker lags far behind the others (plain LRU would evict the chunks it still needs).
// When the records that touch a chunk are split over ranks (or some are never read) the chunk
// never becomes spent and rule 2 applies: the loader's prefetch credits bound how far reads run
// ahead, so a budget of the window plus the look-ahead still holds the window's chunks; bytes are
// always correct, and decode_stats shows any decode repeated.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "gpufeed/decode_stats.hpp"
#include "gpufeed/detail/unit_cache/byte_budget.hpp"

namespace gpufeed::detail::unit_cache {

struct entry {
  std::unique_ptr<std::byte[]> bytes;
  std::size_t size = 0;
  std::uint64_t users = 1;  // records that read this chunk once per epoch
  std::uint64_t reads = 0;  // record reads served since it was decoded
  std::uint32_t pins = 0;
  bool ready = false;
  bool listed = false;                    // in spent or open (unpinned and ready)
  std::list<std::uint64_t>::iterator at;  // its place there
  [[nodiscard]] bool spent() const noexcept { return reads && reads % users == 0; }
};

// Cache-line aligned: no false sharing between stripes.
struct alignas(64) stripe {
  mutable std::mutex mutex;
  std::condition_variable ready;
  std::unordered_map<std::uint64_t, entry> table;
  std::list<std::uint64_t> spent, open;  // unpinned ready chunks, least recently used first
  decode_stats stats;                    // this stripe's counters, under mutex
};

// The stripes and their eviction lists. Evicted chunks' bytes leave `held`'s count.
class stripe_table {
 public:
  // 64 stripes: h5py's automatic chunks give block_shuffled windows of 16 bands, pack's of 128
  // units; with 64 stripes few of them share a lock.
  static constexpr std::size_t stripe_count = 64;

  explicit stripe_table(byte_budget& held) noexcept : held_(&held) {}
  stripe_table(const stripe_table&) = delete;
  stripe_table& operator=(const stripe_table&) = delete;

  stripe& stripe_of(std::uint64_t group) noexcept {
    std::uint64_t h = group * 0x9E3779B97F4A7C15ull;  // Fibonacci hashing: bands are consecutive
    return stripes_[static_cast<std::size_t>(h >> 58)];  // the top 6 bits: 64 stripes
  }

  // A stripe's lock on the per-record paths (get, try_get, pin_ready, unpin_ready, unpin): when
  // another reader holds it, the time spent waiting for it is counted (two clock reads per
  // contended lock, none otherwise): decode_stats::cache_lock_wait_seconds.
  std::unique_lock<std::mutex> lock_timed(stripe& s) const {
    std::unique_lock lock(s.mutex, std::try_to_lock);
    if (!lock.owns_lock()) {
      const auto t0 = std::chrono::steady_clock::now();
      lock.lock();
      lock_wait_ns_.fetch_add(
          static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::steady_clock::now() - t0)
                                         .count()),
          std::memory_order_relaxed);
    }
    return lock;
  }

  // Holds the lock of `group`'s stripe in `lock`, switching from stripe s if that is another.
  void relock(stripe*& s, std::unique_lock<std::mutex>& lock, std::uint64_t group) {
    stripe& want = stripe_of(group);
    if (s == &want) return;
    if (lock.owns_lock()) lock.unlock();
    s = &want;
    lock = lock_timed(want);
  }

  // Enters chunk `key` as being decoded: pinned once, not ready, its bytes not yet reserved.
  // The entry's address is stable (a node of the table) and only its decoder removes it.
  static entry& enter(stripe& s, std::uint64_t key, std::size_t bytes, std::uint64_t users) {
    entry& e = s.table[key];
    e.size = bytes;
    e.users = std::max<std::uint64_t>(1, users);
    e.pins = 1;
    return e;
  }
  // Removes an entered chunk that will not be cached and wakes its waiters. s.mutex held.
  static void abandon(stripe& s, std::uint64_t key) noexcept {
    s.table.erase(key);
    s.ready.notify_all();
  }

  // Pins e (taking it off the eviction lists).
  void take(stripe& s, entry& e) noexcept {
    if (e.listed) {
      (e.spent() ? s.spent : s.open).erase(e.at);
      listed_[e.spent() ? 0 : 1].fetch_sub(1, std::memory_order_relaxed);
      e.listed = false;
    }
    ++e.pins;
  }

  void unpin(stripe& s, std::uint64_t key) noexcept {
    auto lock = lock_timed(s);
    release(s, key);
  }

  // Drops one pin of chunk `key`; unpinned and ready, it joins its eviction list. s.mutex held.
  void release(stripe& s, std::uint64_t key) noexcept {
    const auto it = s.table.find(key);
    if (it == s.table.end()) return;
    entry& e = it->second;
    if (--e.pins || !e.ready) return;
    auto& list = e.spent() ? s.spent : s.open;
    e.at = list.insert(list.end(), key);  // most recently used at the back
    listed_[e.spent() ? 0 : 1].fetch_add(1, std::memory_order_relaxed);
    e.listed = true;
  }

  // Evicts one chunk: a spent one from any stripe, else (unless spent_only) an open one. Takes
  // one stripe lock at a time, starting at a rotating stripe so decoders spread their evictions.
  // A buffer of `size` bytes goes to `keep` when it is empty. False: nothing could be evicted.
  // A scan is not atomic (a chunk unpinned in a stripe already passed is missed while other
  // decoders take the ones ahead), so a scan that finds nothing is repeated while the counts of
  // listed chunks say some exist, a bounded number of times, and open chunks are scanned only
  // when no spent one is listed: a race never evicts a chunk still to be read while a spent one
  // waits. After the last round the fallback is an uncached decode: correct, only slower.
  bool evict_one(std::unique_ptr<std::byte[]>& keep, std::size_t size, bool spent_only) noexcept {
    for (int round = 0; round < 64; ++round) {
      if (scan_evict(keep, size, 0)) return true;
      if (listed_[0].load(std::memory_order_relaxed)) continue;  // spent ones exist: again
      if (spent_only) return false;
      if (scan_evict(keep, size, 1)) return true;
      if (!listed_[0].load(std::memory_order_relaxed) && !listed_[1].load(std::memory_order_relaxed))
        return false;
    }
    return false;
  }

  // Removes every chunk no reader holds, stripe by stripe, handing each one's buffer to
  // take(spare_buffer) outside the stripe's lock; with keep_counted its bytes stay held.
  template <class Take>
  void clear_unused(bool keep_counted, Take&& take) noexcept {
    for (stripe& s : stripes_) {
      std::unique_lock lock(s.mutex);
      while (!s.spent.empty() || !s.open.empty()) {
        auto& list = s.spent.empty() ? s.open : s.spent;
        spare_buffer b = evict(s, list, list.begin(), keep_counted);
        lock.unlock();
        take(std::move(b));
        lock.lock();
      }
    }
  }

  // Adds every stripe's counters to t, and the time spent waiting for stripe locks.
  void add_stats(decode_stats& t) const {
    for (const stripe& s : stripes_) {
      std::lock_guard lock(s.mutex);
      t.chunks_decoded += s.stats.chunks_decoded;
      t.decoded_bytes += s.stats.decoded_bytes;
      t.cache_hits += s.stats.cache_hits;
      t.cache_waits += s.stats.cache_waits;
      t.cache_wait_seconds += s.stats.cache_wait_seconds;
      t.uncached_decodes += s.stats.uncached_decodes;
      t.decoded_ahead += s.stats.decoded_ahead;
    }
    t.cache_lock_wait_seconds =
        1e-9 * static_cast<double>(lock_wait_ns_.load(std::memory_order_relaxed));
  }

 private:
  // Removes chunk `at` of `list` (s.spent or s.open) and returns its buffer and size, to be
  // freed or reused outside the lock; its bytes leave the held count unless keep_counted (a
  // spare buffer). s.mutex held.
  spare_buffer evict(stripe& s, std::list<std::uint64_t>& list,
                     std::list<std::uint64_t>::iterator at, bool keep_counted = false) noexcept {
    const auto it = s.table.find(*at);
    list.erase(at);
    listed_[&list == &s.spent ? 0 : 1].fetch_sub(1, std::memory_order_relaxed);
    if (!keep_counted) held_->sub(it->second.size);
    spare_buffer b{it->second.size, std::move(it->second.bytes)};
    s.table.erase(it);
    return b;
  }

  // One scan of evict_one() over the stripes' spent (list 0) or open (list 1) chunks.
  bool scan_evict(std::unique_ptr<std::byte[]>& keep, std::size_t size, int which) noexcept {
    const std::size_t start = next_victim_.fetch_add(1, std::memory_order_relaxed);
    for (std::size_t i = 0; i < stripe_count; ++i) {
      stripe& s = stripes_[(start + i) % stripe_count];
      std::unique_lock lock(s.mutex);
      auto& list = which == 0 ? s.spent : s.open;
      if (list.empty()) continue;
      // Spent: the most recently released (its buffer is the warmest); open: the least.
      spare_buffer victim = evict(s, list, which == 0 ? std::prev(list.end()) : list.begin());
      lock.unlock();
      if (!keep && victim.size == size) keep = std::move(victim.bytes);
      return true;  // victim, if not kept, is freed here, outside the lock
    }
    return false;
  }

  byte_budget* held_;
  std::array<stripe, stripe_count> stripes_;
  std::atomic<std::size_t> next_victim_{0};
  std::atomic<std::size_t> listed_[2] = {0, 0};  // chunks in the stripes' spent, open lists
  mutable std::atomic<std::uint64_t> lock_wait_ns_{0};
};

}  // namespace gpufeed::detail::unit_cache
