// gpufeed — the decoded chunks of one hdf5_source, shared by all its readers (every worker of
// every loader on the source), bounded by a byte budget. Ordinary heap memory, never pinned.
//
// Concurrency: one mutex guards the table. A chunk absent from the table is entered as
// "decoding" by the first reader that wants it, which decodes outside the lock; readers that
// want it meanwhile do not decode it again: try_get() tells them it is busy (a record over many
// chunks takes its other chunks first), get() waits on a condition variable. A failed decode
// removes the entry and wakes them: each then decodes itself, so every reader of a damaged chunk
// gets its own corrupt_error naming its record. A reader holds a pin on the chunk while it
// copies from it; pinned and decoding chunks are never evicted.
//
// Budget: held bytes (decoding chunks included) never exceed the budget. When a new chunk does
// not fit and no unpinned chunk can be evicted, it is decoded into the reader's own buffer for
// this one record and not cached (counted as uncached_decodes).
//
// Eviction rule (the victim when room is needed):
//   1. a spent chunk: one that every record touching it has read since it was decoded (reads a
//      multiple of its users), least recently used first. In one epoch each record is read
//      once, so a spent chunk is not needed again this epoch.
//   2. otherwise the least recently used unpinned chunk.
// Hence: if the budget holds every chunk that is open at once (decoded, with records still to
// read this epoch) plus one per reader decoding — in block_shuffled order, the window's units plus
// the planner's look-ahead (cache_budget.hpp) — room is always found among spent chunks, an open
// chunk is never evicted, and each chunk is decoded at most once per epoch per rank — also when
// one worker lags far behind the others (plain LRU would evict the chunks it still needs). When
// the records that touch a chunk are split over ranks (or some are never read) the chunk never
// becomes spent and rule 2 applies: the loader's prefetch credits bound how far reads run ahead,
// so a budget of the window plus the look-ahead still holds the window's chunks; bytes are
// always correct, and decode_stats shows any decode repeated.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>

#include "gpufeed/decode_stats.hpp"
#include "gpufeed/detail/byte_buffer.hpp"

namespace gpufeed::detail::hdf5 {

class shared_chunk_cache {
  struct entry {
    std::unique_ptr<std::byte[]> bytes;
    std::size_t size = 0;
    std::uint64_t users = 1;  // records that read this chunk once per epoch
    std::uint64_t reads = 0;  // record reads served since it was decoded
    std::uint32_t pins = 0;
    bool ready = false;
    bool listed = false;                  // in spent_ or open_ (unpinned and ready)
    std::list<std::uint64_t>::iterator at;  // its place there
    [[nodiscard]] bool spent() const noexcept { return reads && reads % users == 0; }
  };

 public:
  // A chunk's decoded bytes, held for one record's copy. Unpins on destruction.
  class pin {
   public:
    pin() = default;
    pin(const pin&) = delete;
    pin& operator=(const pin&) = delete;
    pin(pin&& o) noexcept : cache_(o.cache_), key_(o.key_), data_(o.data_) { o.cache_ = nullptr; }
    ~pin() {
      if (cache_) cache_->unpin(key_);
    }
    [[nodiscard]] const std::byte* data() const noexcept { return data_; }

   private:
    friend class shared_chunk_cache;
    pin(shared_chunk_cache* c, std::uint64_t key, const std::byte* d) noexcept
        : cache_(c), key_(key), data_(d) {}
    shared_chunk_cache* cache_ = nullptr;  // null: a private buffer, nothing to unpin
    std::uint64_t key_ = 0;
    const std::byte* data_ = nullptr;
  };

  explicit shared_chunk_cache(std::size_t budget) : budget_(budget) {}
  shared_chunk_cache(const shared_chunk_cache&) = delete;
  shared_chunk_cache& operator=(const shared_chunk_cache&) = delete;

  // The decoded bytes (`bytes` long) of chunk `key`, read by `users` records per epoch. When
  // absent, decode(span) fills them: in the cache, or in `own` when the budget has no room.
  // While another reader decodes it, waits for that decode. Exceptions from decode propagate
  // (the chunk is not cached).
  template <class Decode>
  pin get(std::uint64_t key, std::size_t bytes, std::uint64_t users, byte_buffer& own,
          Decode&& decode) {
    auto lock = lock_timed();
    for (bool waited = false;; waited = true) {
      if (auto p = try_get_locked(lock, key, bytes, users, own, decode, waited)) return std::move(*p);
      const auto t0 = std::chrono::steady_clock::now();
      ready_.wait(lock, [&] {
        const auto j = table_.find(key);
        return j == table_.end() || j->second.ready;
      });
      stats_.cache_wait_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }

  // As get(), but never waits: nullopt while another reader decodes the chunk. A reader that
  // needs many chunks (one record over a band of them) takes the others meanwhile, so readers
  // that start on one band decode its chunks side by side instead of queueing behind one decode.
  template <class Decode>
  std::optional<pin> try_get(std::uint64_t key, std::size_t bytes, std::uint64_t users,
                             byte_buffer& own, Decode&& decode) {
    auto lock = lock_timed();
    return try_get_locked(lock, key, bytes, users, own, decode, false);
  }

  // Decode ahead: decodes chunk `key` into the cache for reads to come, unless it is cached or
  // being decoded already (true), or there is no room without evicting a chunk that still has
  // records to serve (false: the caller stops decoding ahead). Only free room and spent chunks
  // make room, so decoding ahead never costs a decode of the chunks being read now. The chunk
  // counts as open (no read served yet). Exceptions from decode propagate (nothing cached).
  template <class Decode>
  bool decode_ahead(std::uint64_t key, std::size_t bytes, std::uint64_t users, Decode&& decode) {
    std::unique_lock lock(mutex_);
    if (table_.count(key)) return true;
    std::unique_ptr<std::byte[]> reused;
    if (!make_room(bytes, reused, /*spent_only=*/true)) return false;
    ++stats_.chunks_decoded;
    ++stats_.decoded_ahead;
    stats_.decoded_bytes += bytes;
    entry& e = decode_entry(lock, key, bytes, users, std::move(reused), decode);
    e.ready = true;
    e.reads = 0;
    release(key);  // unpinned: joins the open chunks
    ready_.notify_all();
    return true;
  }

  // Counts a decode done outside the cache (a chunk decoded straight into its record).
  // Under one lock: pins each chunk of `keys` that is ready and counts the read (out[i] = its
  // bytes), out[i] = nullptr for the others (absent or being decoded: read them through get()).
  void pin_ready(std::span<const std::uint64_t> keys, std::span<const std::byte*> out) {
    auto lock = lock_timed();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      out[i] = nullptr;
      const auto it = table_.find(keys[i]);
      if (it == table_.end() || !it->second.ready) continue;
      take(it->second);
      ++it->second.reads;
      ++stats_.cache_hits;
      out[i] = it->second.bytes.get();
    }
  }
  // Under one lock: unpins the chunks pin_ready() pinned (out[i] not null), counting
  // `more_reads` further record reads each of them served while pinned (band_hold.hpp).
  void unpin_ready(std::span<const std::uint64_t> keys, std::span<const std::byte* const> out,
                   std::uint64_t more_reads = 0) noexcept {
    auto lock = lock_timed();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!out[i]) continue;
      if (more_reads) {
        const auto it = table_.find(keys[i]);
        if (it != table_.end()) it->second.reads += more_reads;
        stats_.cache_hits += more_reads;
      }
      release(keys[i]);
    }
  }

  // Relaxed atomics: no lock per record.
  void count_direct_decode(std::size_t bytes) noexcept {
    direct_chunks_.fetch_add(1, std::memory_order_relaxed);
    direct_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void count_record(std::uint64_t bytes) noexcept {
    records_.fetch_add(1, std::memory_order_relaxed);
    delivered_.fetch_add(bytes, std::memory_order_relaxed);
  }

  // Grows (never shrinks) the budget: several loaders may share the source.
  void raise_budget(std::size_t bytes) noexcept {
    std::lock_guard lock(mutex_);
    budget_ = std::max(budget_, bytes);
  }
  // Frees every chunk no reader holds.
  void drop_unused() noexcept {
    std::lock_guard lock(mutex_);
    while (evict_one()) {
    }
  }

  [[nodiscard]] decode_stats stats() const {
    std::lock_guard lock(mutex_);
    decode_stats s = stats_;
    s.cache_budget_bytes = budget_;
    s.chunks_decoded += direct_chunks_.load(std::memory_order_relaxed);
    s.decoded_bytes += direct_bytes_.load(std::memory_order_relaxed);
    s.records = records_.load(std::memory_order_relaxed);
    s.delivered_bytes = delivered_.load(std::memory_order_relaxed);
    s.cache_lock_wait_seconds = 1e-9 * static_cast<double>(lock_wait_ns_.load(std::memory_order_relaxed));
    return s;
  }
  [[nodiscard]] std::size_t held_bytes() const {
    std::lock_guard lock(mutex_);
    return held_;
  }

 private:
  // get()'s body under `lock` (held on entry; held on return except after a decode).
  template <class Decode>
  std::optional<pin> try_get_locked(std::unique_lock<std::mutex>& lock, std::uint64_t key,
                                    std::size_t bytes, std::uint64_t users, byte_buffer& own,
                                    Decode& decode, bool waited) {
    if (const auto it = table_.find(key); it != table_.end()) {
      entry& e = it->second;
      if (!e.ready) return std::nullopt;
      take(e);
      ++e.reads;
      ++stats_.cache_hits;
      if (waited) ++stats_.cache_waits;
      return pin(this, key, e.bytes.get());
    }
    ++stats_.chunks_decoded;
    stats_.decoded_bytes += bytes;
    std::unique_ptr<std::byte[]> reused;
    if (!make_room(bytes, reused)) {
      ++stats_.uncached_decodes;
      lock.unlock();
      const auto buf = own.resize(bytes);
      decode(buf);
      lock.lock();
      return pin(nullptr, key, buf.data());
    }
    entry& e = decode_entry(lock, key, bytes, users, std::move(reused), decode);
    e.ready = true;
    e.reads = 1;
    ready_.notify_all();
    return pin(this, key, e.bytes.get());
  }

  // Enters chunk `key` as being decoded (pinned once, its bytes counted against the budget),
  // decodes it outside the lock into `reused` (an evicted buffer of this size, if any: no
  // allocator round trip and no fresh pages to fault in per decode; 128 KiB chunks sit at
  // glibc's mmap threshold) or a new buffer, and returns it, lock held, not yet ready. A failed
  // decode removes the entry, wakes the waiters and rethrows.
  template <class Decode>
  entry& decode_entry(std::unique_lock<std::mutex>& lock, std::uint64_t key, std::size_t bytes,
                      std::uint64_t users, std::unique_ptr<std::byte[]> reused, Decode& decode) {
    entry& e = table_[key];
    e.size = bytes;
    e.users = std::max<std::uint64_t>(1, users);
    e.pins = 1;
    held_ += bytes;
    stats_.cache_peak_bytes = std::max(stats_.cache_peak_bytes, held_);
    lock.unlock();
    try {
      e.bytes = reused ? std::move(reused) : std::unique_ptr<std::byte[]>(new std::byte[bytes]);
      decode(std::span<std::byte>(e.bytes.get(), bytes));
    } catch (...) {
      lock.lock();
      held_ -= bytes;
      table_.erase(key);
      ready_.notify_all();
      throw;
    }
    lock.lock();
    return e;
  }

  // Pins e (taking it off the eviction lists).
  void take(entry& e) noexcept {
    if (e.listed) {
      (e.spent() ? spent_ : open_).erase(e.at);
      e.listed = false;
    }
    ++e.pins;
  }

  void unpin(std::uint64_t key) noexcept {
    auto lock = lock_timed();
    release(key);
  }

  // Drops one pin of chunk `key`; unpinned and ready, it joins its eviction list. mutex_ held.
  void release(std::uint64_t key) noexcept {
    const auto it = table_.find(key);
    if (it == table_.end()) return;
    entry& e = it->second;
    if (--e.pins || !e.ready) return;
    auto& list = e.spent() ? spent_ : open_;
    e.at = list.insert(list.end(), key);  // most recently used at the back
    e.listed = true;
  }

  // Evicts one chunk (spent ones first; with spent_only, no other); its buffer goes to *keep
  // when keep is set and the size is `size`.
  bool evict_one(std::unique_ptr<std::byte[]>* keep = nullptr, std::size_t size = 0,
                 bool spent_only = false) noexcept {
    auto& list = spent_.empty() && !spent_only ? open_ : spent_;
    if (list.empty()) return false;
    const auto it = table_.find(list.front());
    list.pop_front();
    held_ -= it->second.size;
    if (keep && it->second.size == size) *keep = std::move(it->second.bytes);
    table_.erase(it);
    return true;
  }

  // Evicts until `bytes` more fit; `reused` receives an evicted buffer of that size, if any.
  bool make_room(std::size_t bytes, std::unique_ptr<std::byte[]>& reused,
                 bool spent_only = false) noexcept {
    if (bytes > budget_) return false;
    while (held_ + bytes > budget_)
      if (!evict_one(&reused, bytes, spent_only)) return false;
    return true;
  }

  // The table's lock on the per-record paths (get, try_get, pin_ready, unpin_ready, unpin):
  // when another reader holds it, the time spent waiting for it is counted (two clock reads per
  // contended lock, none otherwise): decode_stats::cache_lock_wait_seconds.
  std::unique_lock<std::mutex> lock_timed() const {
    std::unique_lock lock(mutex_, std::try_to_lock);
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

  mutable std::mutex mutex_;
  mutable std::atomic<std::uint64_t> lock_wait_ns_{0};
  std::condition_variable ready_;
  std::unordered_map<std::uint64_t, entry> table_;
  std::list<std::uint64_t> spent_, open_;  // unpinned ready chunks, least recently used first
  std::size_t budget_;
  std::size_t held_ = 0;
  decode_stats stats_;  // the cache's own counters, under mutex_
  std::atomic<std::uint64_t> direct_chunks_{0}, direct_bytes_{0}, records_{0}, delivered_{0};
};

}  // namespace gpufeed::detail::hdf5
