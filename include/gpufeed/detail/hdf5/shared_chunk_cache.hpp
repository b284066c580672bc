// gpufeed — the decoded chunks of one hdf5_source, shared by all its readers (every worker of
// every loader on the source), bounded by a byte budget. Ordinary heap memory, never pinned.
//
// Concurrency: the table is split into stripes, each with its own mutex, table, eviction lists
// and condition variable; a chunk lives in the stripe of its group (the caller's contract: a
// key always comes with the same group; hdf5 readers pass the chunk's band, so one record's
// chunks share one lock). One mutex for the whole table bounded block_shuffled: a record read
// takes it twice, and 14 workers waited for it a tenth of their time (docs/design.md). A chunk
// absent from its stripe is entered as "decoding" by the first reader that wants it, which
// decodes outside the lock; readers that want it meanwhile do not decode it again: try_get()
// tells them it is busy (a record over many chunks takes its other chunks first), get() waits on
// the stripe's condition variable. A failed decode removes the entry and wakes them: each then
// decodes itself, so every reader of a damaged chunk gets its own corrupt_error naming its
// record. A reader holds a pin on the chunk while it copies from it; pinned and decoding chunks
// are never evicted.
//
// Budget: held bytes (decoding chunks included) never exceed the budget: one atomic count for
// all stripes, raised by compare-and-swap only when the bytes fit. A decoder that finds no room
// evicts, one stripe lock at a time and holding no other (so no lock order to keep); when no
// chunk can be evicted, it decodes into the cache's one overflow buffer for this one record and
// does not cache it (counted as uncached_decodes): one such decode at a time, so N readers never
// hold N extra copies (decoded memory stays within the budget plus one chunk, which is no larger
// than the budget: record_reader refuses a chunk larger than the budget). Buffers of forgotten
// chunks (forget_unused) stay held as spares, taken by the next decodes of their size, freed
// first when room is needed otherwise. Readers' decode scratch (a chunk's stored bytes, its
// filters' intermediate outputs) is counted in the same held bytes (decode_scratch.hpp,
// reserve_scratch): idle scratch is freed for room like a spare.
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
// the planner's look-ahead (cache_budget.hpp) — room is always found among spent chunks, an open
// chunk is never evicted, and each chunk is decoded at most once per epoch per rank — also when
// one worker lags far behind the others (plain LRU would evict the chunks it still needs). When
// the records that touch a chunk are split over ranks (or some are never read) the chunk never
// becomes spent and rule 2 applies: the loader's prefetch credits bound how far reads run ahead,
// so a budget of the window plus the look-ahead still holds the window's chunks; bytes are
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
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "gpufeed/decode_stats.hpp"
#include "gpufeed/detail/byte_buffer.hpp"
#include "gpufeed/detail/hdf5/decode_scratch.hpp"

namespace gpufeed::detail::hdf5 {

class shared_chunk_cache {
  struct entry {
    std::unique_ptr<std::byte[]> bytes;
    std::size_t size = 0;
    std::uint64_t users = 1;  // records that read this chunk once per epoch
    std::uint64_t reads = 0;  // record reads served since it was decoded
    std::uint32_t pins = 0;
    bool ready = false;
    bool listed = false;                  // in spent or open (unpinned and ready)
    std::list<std::uint64_t>::iterator at;  // its place there
    [[nodiscard]] bool spent() const noexcept { return reads && reads % users == 0; }
  };

  // A chunk's buffer and size, out of the table: evicted, or spare (forget_unused).
  struct spare_buffer {
    std::size_t size;
    std::unique_ptr<std::byte[]> bytes;
  };

  // 64 stripes: h5py's automatic chunks give block_shuffled windows of 16 bands, pack's of 128
  // units; with 64 stripes few of them share a lock. Cache-line aligned: no false sharing.
  static constexpr std::size_t stripe_count = 64;
  struct alignas(64) stripe {
    mutable std::mutex mutex;
    std::condition_variable ready;
    std::unordered_map<std::uint64_t, entry> table;
    std::list<std::uint64_t> spent, open;  // unpinned ready chunks, least recently used first
    decode_stats stats;  // this stripe's counters, under mutex
  };

 public:
  // A chunk's decoded bytes, held for one record's copy. Unpins on destruction.
  class pin {
   public:
    pin() = default;
    pin(const pin&) = delete;
    pin& operator=(const pin&) = delete;
    pin(pin&& o) noexcept
        : cache_(o.cache_), at_(o.at_), key_(o.key_), data_(o.data_),
          overflow_(std::move(o.overflow_)) {
      o.cache_ = nullptr;
    }
    ~pin() {
      if (cache_) cache_->unpin(*at_, key_);
    }
    [[nodiscard]] const std::byte* data() const noexcept { return data_; }

   private:
    friend class shared_chunk_cache;
    pin(shared_chunk_cache* c, stripe* at, std::uint64_t key, const std::byte* d) noexcept
        : cache_(c), at_(at), key_(key), data_(d) {}
    pin(std::unique_lock<std::mutex> overflow, const std::byte* d) noexcept
        : data_(d), overflow_(std::move(overflow)) {}
    shared_chunk_cache* cache_ = nullptr;  // null: the overflow buffer, nothing to unpin
    stripe* at_ = nullptr;
    std::uint64_t key_ = 0;
    const std::byte* data_ = nullptr;
    std::unique_lock<std::mutex> overflow_;  // held while the overflow buffer is read
  };

  explicit shared_chunk_cache(std::size_t budget) : budget_(budget) {}
  shared_chunk_cache(const shared_chunk_cache&) = delete;
  shared_chunk_cache& operator=(const shared_chunk_cache&) = delete;

  // The decoded bytes (`bytes` long) of chunk `key` of group `group`, read by `users` records
  // per epoch. When absent, decode(span) fills them: in the cache, or in the overflow buffer when
  // the budget has no room (the pin then holds the overflow lock: drop it before the next get). While another reader decodes it, waits for that decode. Exceptions from decode
  // propagate (the chunk is not cached).
  template <class Decode>
  pin get(std::uint64_t group, std::uint64_t key, std::size_t bytes, std::uint64_t users,
          Decode&& decode) {
    stripe& s = stripe_of(group);
    auto lock = lock_timed(s);
    for (bool waited = false;; waited = true) {
      if (auto p = try_get_locked(s, lock, key, bytes, users, decode, waited))
        return std::move(*p);
      const auto t0 = std::chrono::steady_clock::now();
      s.ready.wait(lock, [&] {
        const auto j = s.table.find(key);
        return j == s.table.end() || j->second.ready;
      });
      s.stats.cache_wait_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }

  // As get(), but never waits: nullopt while another reader decodes the chunk. A reader that
  // needs many chunks (one record over a band of them) takes the others meanwhile, so readers
  // that start on one band decode its chunks side by side instead of queueing behind one decode.
  template <class Decode>
  std::optional<pin> try_get(std::uint64_t group, std::uint64_t key, std::size_t bytes,
                             std::uint64_t users, Decode&& decode) {
    stripe& s = stripe_of(group);
    auto lock = lock_timed(s);
    return try_get_locked(s, lock, key, bytes, users, decode, false);
  }

  // Decode ahead: decodes chunk `key` into the cache for reads to come, unless it is cached or
  // being decoded already (true), or there is no room without evicting a chunk that still has
  // records to serve (false: the caller stops decoding ahead). Only free room and spent chunks
  // make room, so decoding ahead never costs a decode of the chunks being read now. The chunk
  // counts as open (no read served yet). Exceptions from decode propagate (nothing cached).
  template <class Decode>
  bool decode_ahead(std::uint64_t group, std::uint64_t key, std::size_t bytes, std::uint64_t users,
                    Decode&& decode) {
    stripe& s = stripe_of(group);
    std::unique_lock lock(s.mutex);
    if (s.table.count(key)) return true;
    entry& e = enter(s, key, bytes, users);
    lock.unlock();
    std::unique_ptr<std::byte[]> reused;
    if (!reserve(bytes, reused, /*spent_only=*/true)) {
      lock.lock();
      abandon(s, key);
      return false;
    }
    fill(s, lock, key, e, std::move(reused), decode);
    ++s.stats.chunks_decoded;
    ++s.stats.decoded_ahead;
    s.stats.decoded_bytes += bytes;
    e.ready = true;
    e.reads = 0;
    release(s, key);  // unpinned: joins the open chunks
    s.ready.notify_all();
    return true;
  }

  // Pins each chunk of `keys` that is ready and counts the read (out[i] = its bytes), out[i] =
  // nullptr for the others (absent or being decoded: read them through get()). groups[i] is
  // keys[i]'s group; consecutive keys of one stripe take its lock once (a band: one lock).
  void pin_ready(std::span<const std::uint64_t> groups, std::span<const std::uint64_t> keys,
                 std::span<const std::byte*> out) {
    stripe* s = nullptr;
    std::unique_lock<std::mutex> lock;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      relock(s, lock, groups[i]);
      out[i] = nullptr;
      const auto it = s->table.find(keys[i]);
      if (it == s->table.end() || !it->second.ready) continue;
      take(*s, it->second);
      ++it->second.reads;
      ++s->stats.cache_hits;
      out[i] = it->second.bytes.get();
    }
  }
  // Unpins the chunks pin_ready() pinned (out[i] not null), counting `more_reads` further record
  // reads each of them served while pinned (band_hold.hpp). Locks as pin_ready().
  void unpin_ready(std::span<const std::uint64_t> groups, std::span<const std::uint64_t> keys,
                   std::span<const std::byte* const> out, std::uint64_t more_reads = 0) noexcept {
    stripe* s = nullptr;
    std::unique_lock<std::mutex> lock;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!out[i]) continue;
      relock(s, lock, groups[i]);
      if (more_reads) {
        const auto it = s->table.find(keys[i]);
        if (it != s->table.end()) it->second.reads += more_reads;
        s->stats.cache_hits += more_reads;
      }
      release(*s, keys[i]);
    }
  }

  // Counts a decode done outside the cache (a chunk decoded straight into its record).
  // Relaxed atomics: no lock per record.
  void count_direct_decode(std::size_t bytes) noexcept {
    direct_chunks_.fetch_add(1, std::memory_order_relaxed);
    direct_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void count_record(std::uint64_t bytes) noexcept {
    records_.fetch_add(1, std::memory_order_relaxed);
    delivered_.fetch_add(bytes, std::memory_order_relaxed);
  }

  [[nodiscard]] std::size_t budget() const noexcept {
    return budget_.load(std::memory_order_relaxed);
  }
  // Grows (never shrinks) the budget: several loaders may share the source.
  void raise_budget(std::size_t bytes) noexcept {
    raise_to(budget_, bytes);
  }
  // Frees every chunk no reader holds, and the spare buffers.
  void drop_unused() noexcept {
    {
      std::lock_guard lock(overflow_mutex_);
      overflow_.release();
    }
    clear_unused(/*keep_counted=*/false, [](spare_buffer) noexcept {});  // freed on return
    while (free_one_spare()) {
    }
    while (give_back_idle(nullptr)) {
    }
  }
  // Forgets every chunk no reader holds (the next read decodes it again) but keeps its buffer,
  // still counted in the held bytes, for the next decode of that size: a decode into a buffer
  // the allocator just handed back faults in fresh pages (on a 2-core machine the kernel's page
  // zeroing took over a third of compressed_bench's CPU; on a 16-core one it was within the
  // noise). A decode that needs room frees spare buffers of other
  // sizes first.
  void forget_unused() noexcept {
    clear_unused(/*keep_counted=*/true, [this](spare_buffer b) noexcept {
      const std::size_t size = b.size;
      try {
        std::lock_guard lock(spare_mutex_);
        spare_.push_back(std::move(b));
        spare_count_.fetch_add(1, std::memory_order_relaxed);
      } catch (...) {  // no room in the list: the buffer is freed, its bytes no longer held
        held_.fetch_sub(size, std::memory_order_acq_rel);
      }
    });
  }

  [[nodiscard]] decode_stats stats() const {
    decode_stats t;
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
    t.cache_peak_bytes = peak_.load(std::memory_order_relaxed);
    t.scratch_peak_bytes = scratch_.peak();
    t.cache_budget_bytes = budget_.load(std::memory_order_relaxed);
    t.chunks_decoded += direct_chunks_.load(std::memory_order_relaxed);
    t.decoded_bytes += direct_bytes_.load(std::memory_order_relaxed);
    t.records = records_.load(std::memory_order_relaxed);
    t.delivered_bytes = delivered_.load(std::memory_order_relaxed);
    t.cache_lock_wait_seconds = 1e-9 * static_cast<double>(lock_wait_ns_.load(std::memory_order_relaxed));
    return t;
  }
  [[nodiscard]] std::size_t held_bytes() const noexcept {
    return held_.load(std::memory_order_acquire);
  }

  // The readers' decode scratch accounts (decode_scratch.hpp).
  [[nodiscard]] scratch_registry& scratch() noexcept { return scratch_; }
  // Reserves `bytes` of the budget for the scratch of account `self`, whose own buffers the
  // caller freed first: free room, spare buffers, spent chunks, other readers' idle scratch.
  // Never evicts a chunk with records still to read (that would cost a decode again) and never
  // waits. False when the budget cannot hold them now (the caller decodes outside it, holding
  // scratch_overflow(): one at a time).
  bool reserve_scratch(std::size_t bytes, const scratch_account& self) noexcept {
    if (bytes > budget_.load(std::memory_order_relaxed)) return false;
    for (;;) {
      if (try_add(bytes)) {
        scratch_.add_held(bytes);
        return true;
      }
      if (free_one_spare()) continue;
      std::unique_ptr<std::byte[]> none;
      if (evict_one(none, 0, /*spent_only=*/true)) continue;
      if (!give_back_idle(&self)) return false;
    }
  }
  // Gives back scratch bytes reserve_scratch() reserved.
  void release_scratch(std::size_t bytes) noexcept {
    if (!bytes) return;
    held_.fetch_sub(bytes, std::memory_order_acq_rel);
    scratch_.sub_held(bytes);
  }
  [[nodiscard]] std::mutex& scratch_overflow() noexcept { return scratch_overflow_mutex_; }

 private:
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
  // Frees one idle reader's scratch other than `self`'s (true), giving its bytes back.
  bool give_back_idle(const scratch_account* self) noexcept {
    const std::size_t bytes = scratch_.free_idle(self);
    release_scratch(bytes);
    return bytes != 0;
  }

  stripe& stripe_of(std::uint64_t group) noexcept {
    std::uint64_t h = group * 0x9E3779B97F4A7C15ull;  // Fibonacci hashing: bands are consecutive
    return stripes_[static_cast<std::size_t>(h >> 58)];  // the top 6 bits: 64 stripes
  }

  // Raises `a` to at least `v`.
  static void raise_to(std::atomic<std::size_t>& a, std::size_t v) noexcept {
    std::size_t now = a.load(std::memory_order_relaxed);
    while (now < v && !a.compare_exchange_weak(now, v)) {
    }
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

  // Holds the lock of `group`'s stripe in `lock`, switching from stripe s if that is another.
  void relock(stripe*& s, std::unique_lock<std::mutex>& lock, std::uint64_t group) {
    stripe& want = stripe_of(group);
    if (s == &want) return;
    if (lock.owns_lock()) lock.unlock();
    s = &want;
    lock = lock_timed(want);
  }

  // get()'s body under `lock` (held on entry; held on return except after a decode).
  template <class Decode>
  std::optional<pin> try_get_locked(stripe& s, std::unique_lock<std::mutex>& lock,
                                    std::uint64_t key, std::size_t bytes, std::uint64_t users,
                                    Decode& decode, bool waited) {
    if (const auto it = s.table.find(key); it != s.table.end()) {
      entry& e = it->second;
      if (!e.ready) return std::nullopt;
      take(s, e);
      ++e.reads;
      ++s.stats.cache_hits;
      if (waited) ++s.stats.cache_waits;
      return pin(this, &s, key, e.bytes.get());
    }
    ++s.stats.chunks_decoded;
    s.stats.decoded_bytes += bytes;
    entry& e = enter(s, key, bytes, users);
    lock.unlock();
    std::unique_ptr<std::byte[]> reused;
    if (!reserve(bytes, reused)) {
      lock.lock();
      ++s.stats.uncached_decodes;
      abandon(s, key);  // readers waiting for it decode it themselves
      lock.unlock();
      std::unique_lock overflow(overflow_mutex_);  // one at a time: never a copy per reader
      const auto buf = overflow_.resize(bytes);
      decode(buf);
      lock.lock();
      return pin(std::move(overflow), buf.data());
    }
    fill(s, lock, key, e, std::move(reused), decode);
    e.ready = true;
    e.reads = 1;
    s.ready.notify_all();
    return pin(this, &s, key, e.bytes.get());
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

  // Decodes entered chunk `key`, its bytes reserved, outside the lock into `reused` (an evicted
  // buffer of this size, if any: no allocator round trip and no fresh pages to fault in per
  // decode; 128 KiB chunks sit at glibc's mmap threshold) or a new buffer; returns with the lock
  // held, the entry not yet ready. A failed decode gives back the bytes, removes the entry,
  // wakes the waiters and rethrows.
  template <class Decode>
  void fill(stripe& s, std::unique_lock<std::mutex>& lock, std::uint64_t key, entry& e,
            std::unique_ptr<std::byte[]> reused, Decode& decode) {
    try {
      e.bytes = reused ? std::move(reused) : std::unique_ptr<std::byte[]>(new std::byte[e.size]);
      decode(std::span<std::byte>(e.bytes.get(), e.size));
    } catch (...) {
      held_.fetch_sub(e.size, std::memory_order_acq_rel);
      lock.lock();
      abandon(s, key);
      throw;
    }
    lock.lock();
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

  // Removes chunk `at` of `list` (s.spent or s.open) and returns its buffer and size, to be
  // freed or reused outside the lock; its bytes leave the held count unless keep_counted (a
  // spare buffer). s.mutex held.
  spare_buffer evict(stripe& s, std::list<std::uint64_t>& list,
                     std::list<std::uint64_t>::iterator at, bool keep_counted = false) noexcept {
    const auto it = s.table.find(*at);
    list.erase(at);
    listed_[&list == &s.spent ? 0 : 1].fetch_sub(1, std::memory_order_relaxed);
    if (!keep_counted) held_.fetch_sub(it->second.size, std::memory_order_acq_rel);
    spare_buffer b{it->second.size, std::move(it->second.bytes)};
    s.table.erase(it);
    return b;
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

  // Reserves `bytes` of the budget, evicting until they fit (spent_only: only spent chunks);
  // `reused` receives an evicted buffer of that size, if any. No stripe lock held.
  bool reserve(std::size_t bytes, std::unique_ptr<std::byte[]>& reused,
               bool spent_only = false) noexcept {
    if (bytes > budget_.load(std::memory_order_relaxed)) return false;
    if (take_spare(bytes, reused)) return true;  // its bytes are counted already
    for (;;) {
      if (try_add(bytes)) return true;
      if (free_one_spare()) continue;
      // Spent chunks first, then readers' idle scratch (reallocated by their next decode), then
      // chunks still to be read (decoded again when read).
      if (evict_one(reused, bytes, /*spent_only=*/true)) continue;
      if (spent_only) return false;
      if (give_back_idle(nullptr)) continue;
      if (!evict_one(reused, bytes, false)) return false;
    }
  }

  // A spare buffer of `bytes` into `reused` (true), if there is one.
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
      held_.fetch_sub(spare_.back().size, std::memory_order_acq_rel);
      spare_.pop_back();
      spare_count_.fetch_sub(1, std::memory_order_relaxed);
    }
    return true;
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

  std::array<stripe, stripe_count> stripes_;
  std::atomic<std::size_t> budget_;
  std::atomic<std::size_t> held_{0}, peak_{0};
  std::atomic<std::size_t> next_victim_{0};
  std::atomic<std::size_t> listed_[2] = {0, 0};  // chunks in the stripes' spent, open lists
  std::mutex overflow_mutex_;
  byte_buffer overflow_;  // a chunk decoded outside the budget, under overflow_mutex_
  std::mutex scratch_overflow_mutex_;  // a decode whose scratch the budget cannot hold
  scratch_registry scratch_;
  std::mutex spare_mutex_;
  std::vector<spare_buffer> spare_;  // forget_unused()'s buffers, under spare_mutex_
  std::atomic<std::size_t> spare_count_{0};
  mutable std::atomic<std::uint64_t> lock_wait_ns_{0};
  std::atomic<std::uint64_t> direct_chunks_{0}, direct_bytes_{0}, records_{0}, delivered_{0};
};

}  // namespace gpufeed::detail::hdf5
