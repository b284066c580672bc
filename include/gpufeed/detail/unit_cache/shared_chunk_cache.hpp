// gpufeed — the decoded chunks (decode units) of one source, shared by all its readers (every
// worker of every loader on the source), bounded by a byte budget. Ordinary heap memory, never
// pinned. Nothing here knows the format: a chunk is a key, a group, a size and a decode function
// (hdf5_source's readers: detail/hdf5/record_reader.hpp).
//
// Concurrency: the table is split into stripes, a chunk in the stripe of its group
// (stripes.hpp). A chunk absent from its stripe is entered as "decoding" by the first reader
// that wants it, which decodes outside the lock; readers that want it meanwhile do not decode it
// again: try_get() tells them it is busy (a record over many chunks takes its other chunks
// first), get() waits on the stripe's condition variable. A failed decode removes the entry and
// wakes them: each then decodes itself, so every reader of a damaged chunk gets its own
// corrupt_error naming its record. A reader holds a pin on the chunk while it copies from it
// (pin.hpp); pinned and decoding chunks are never evicted.
//
// Budget: held bytes (decoding chunks included) never exceed the budget (byte_budget.hpp). A
// decoder that finds no room evicts (stripes.hpp, the eviction rule), one stripe lock at a time
// and holding no other (so no lock order to keep); when no chunk can be evicted, it decodes into
// the cache's one overflow buffer for this one record and does not cache it (counted as
// uncached_decodes): one such decode at a time, so N readers never hold N extra copies (decoded
// memory stays within the budget plus one chunk, which is no larger than the budget:
// record_reader refuses a chunk larger than the budget). Buffers of forgotten chunks
// (forget_unused) stay held as spares, taken by the next decodes of their size, freed first when
// room is needed otherwise. Readers' decode scratch (a chunk's stored bytes, its filters'
// intermediate outputs) is counted in the same held bytes (decode_scratch.hpp, reserve_scratch):
// idle scratch is freed for room like a spare.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <utility>

#include "gpufeed/decode_stats.hpp"
#include "gpufeed/detail/byte_buffer.hpp"
#include "gpufeed/detail/unit_cache/byte_budget.hpp"
#include "gpufeed/detail/unit_cache/decode_scratch.hpp"
#include "gpufeed/detail/unit_cache/pin.hpp"
#include "gpufeed/detail/unit_cache/stripes.hpp"

namespace gpufeed::detail::unit_cache {

class shared_chunk_cache {
 public:
  using pin = unit_cache::pin;

  explicit shared_chunk_cache(std::size_t budget) : held_(budget) {}
  shared_chunk_cache(const shared_chunk_cache&) = delete;
  shared_chunk_cache& operator=(const shared_chunk_cache&) = delete;

  // The decoded bytes (`bytes` long) of chunk `key` of group `group`, read by `users` records
  // per epoch. When absent, decode(span) fills them: in the cache, or in the overflow buffer when
  // the budget has no room (the pin then holds the overflow lock: drop it before the next get).
  // While another reader decodes it, waits for that decode. Exceptions from decode propagate
  // (the chunk is not cached).
  template <class Decode>
  pin get(std::uint64_t group, std::uint64_t key, std::size_t bytes, std::uint64_t users,
          Decode&& decode) {
    stripe& s = table_.stripe_of(group);
    auto lock = table_.lock_timed(s);
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
    stripe& s = table_.stripe_of(group);
    auto lock = table_.lock_timed(s);
    return try_get_locked(s, lock, key, bytes, users, decode, false);
  }

  // Decode ahead: decodes chunk `key` into the cache for reads to come, unless it is cached or
  // being decoded already (true), or there is no room without evicting a chunk that still has
  // records to serve, or still_ahead() says the reads it was meant for have begun (false: the
  // caller stops decoding ahead). Only free room and spent chunks make room, so decoding ahead
  // never costs a decode of the chunks being read now. still_ahead() is called under the stripe
  // lock a read of the chunk takes: when it says true, no read of the chunk's window has looked
  // for it yet, so none decoded it, read it whole and had it evicted before this entry (which
  // would make this a second decode). The chunk counts as open (no read served yet).
  // Exceptions from decode propagate (nothing cached).
  template <class Decode, class Ahead>
  bool decode_ahead(std::uint64_t group, std::uint64_t key, std::size_t bytes, std::uint64_t users,
                    Decode&& decode, const Ahead& still_ahead) {
    stripe& s = table_.stripe_of(group);
    std::unique_lock lock(s.mutex);
    if (s.table.count(key)) return true;
    if (!still_ahead()) return false;
    entry& e = stripe_table::enter(s, key, bytes, users);
    lock.unlock();
    std::unique_ptr<std::byte[]> reused;
    if (!reserve(bytes, reused, /*spent_only=*/true)) {
      lock.lock();
      stripe_table::abandon(s, key);
      return false;
    }
    fill(s, lock, key, e, std::move(reused), decode);
    ++s.stats.chunks_decoded;
    ++s.stats.decoded_ahead;
    s.stats.decoded_bytes += bytes;
    e.ready = true;
    e.reads = 0;
    table_.release(s, key);  // unpinned: joins the open chunks
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
      table_.relock(s, lock, groups[i]);
      out[i] = nullptr;
      const auto it = s->table.find(keys[i]);
      if (it == s->table.end() || !it->second.ready) continue;
      table_.take(*s, it->second);
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
      table_.relock(s, lock, groups[i]);
      if (more_reads) {
        const auto it = s->table.find(keys[i]);
        if (it != s->table.end()) it->second.reads += more_reads;
        s->stats.cache_hits += more_reads;
      }
      table_.release(*s, keys[i]);
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

  [[nodiscard]] std::size_t budget() const noexcept { return held_.budget(); }
  // Grows (never shrinks) the budget: several loaders may share the source.
  void raise_budget(std::size_t bytes) noexcept { held_.raise_budget(bytes); }
  // Frees every chunk no reader holds, and the spare buffers.
  void drop_unused() noexcept {
    {
      std::lock_guard lock(overflow_mutex_);
      overflow_.release();
    }
    table_.clear_unused(/*keep_counted=*/false, [](spare_buffer) noexcept {});  // freed on return
    while (held_.free_one_spare()) {
    }
    while (give_back_idle(nullptr)) {
    }
  }
  // Forgets every chunk no reader holds (the next read decodes it again) but keeps its buffer,
  // still counted in the held bytes, for the next decode of that size: a decode into a buffer
  // the allocator just handed back faults in fresh pages (on a 2-core machine the kernel's page
  // zeroing took over a third of compressed_bench's CPU; on a 16-core one it was within the
  // noise). A decode that needs room frees spare buffers of other sizes first.
  void forget_unused() noexcept {
    table_.clear_unused(/*keep_counted=*/true,
                        [this](spare_buffer b) noexcept { held_.keep_spare(std::move(b)); });
  }

  [[nodiscard]] decode_stats stats() const {
    decode_stats t;
    table_.add_stats(t);
    t.cache_peak_bytes = held_.peak();
    t.scratch_peak_bytes = scratch_.peak();
    t.cache_budget_bytes = held_.budget();
    t.chunks_decoded += direct_chunks_.load(std::memory_order_relaxed);
    t.decoded_bytes += direct_bytes_.load(std::memory_order_relaxed);
    t.records = records_.load(std::memory_order_relaxed);
    t.delivered_bytes = delivered_.load(std::memory_order_relaxed);
    return t;
  }
  [[nodiscard]] std::size_t held_bytes() const noexcept { return held_.held(); }

  // The readers' decode scratch accounts (decode_scratch.hpp).
  [[nodiscard]] scratch_registry& scratch() noexcept { return scratch_; }
  // Reserves `bytes` of the budget for the scratch of account `self`, whose own buffers the
  // caller freed first: free room, spare buffers, spent chunks, other readers' idle scratch.
  // Never evicts a chunk with records still to read (that would cost a decode again) and never
  // waits. False when the budget cannot hold them now (the caller decodes outside it, holding
  // scratch_overflow(): one at a time).
  bool reserve_scratch(std::size_t bytes, const scratch_account& self) noexcept {
    if (bytes > held_.budget()) return false;
    for (;;) {
      if (held_.try_add(bytes)) {
        scratch_.add_held(bytes);
        return true;
      }
      if (held_.free_one_spare()) continue;
      std::unique_ptr<std::byte[]> none;
      if (table_.evict_one(none, 0, /*spent_only=*/true)) continue;
      if (!give_back_idle(&self)) return false;
    }
  }
  // Gives back scratch bytes reserve_scratch() reserved.
  void release_scratch(std::size_t bytes) noexcept {
    if (!bytes) return;
    held_.sub(bytes);
    scratch_.sub_held(bytes);
  }
  [[nodiscard]] std::mutex& scratch_overflow() noexcept { return scratch_overflow_mutex_; }

 private:
  // Frees one idle reader's scratch other than `self`'s (true), giving its bytes back.
  bool give_back_idle(const scratch_account* self) noexcept {
    const std::size_t bytes = scratch_.free_idle(self);
    release_scratch(bytes);
    return bytes != 0;
  }

  // get()'s body under `lock` (held on entry; held on return except after a decode).
  template <class Decode>
  std::optional<pin> try_get_locked(stripe& s, std::unique_lock<std::mutex>& lock,
                                    std::uint64_t key, std::size_t bytes, std::uint64_t users,
                                    Decode& decode, bool waited) {
    if (const auto it = s.table.find(key); it != s.table.end()) {
      entry& e = it->second;
      if (!e.ready) return std::nullopt;
      table_.take(s, e);
      ++e.reads;
      ++s.stats.cache_hits;
      if (waited) ++s.stats.cache_waits;
      return pin(&table_, &s, key, e.bytes.get());
    }
    ++s.stats.chunks_decoded;
    s.stats.decoded_bytes += bytes;
    entry& e = stripe_table::enter(s, key, bytes, users);
    lock.unlock();
    std::unique_ptr<std::byte[]> reused;
    if (!reserve(bytes, reused)) {
      lock.lock();
      ++s.stats.uncached_decodes;
      stripe_table::abandon(s, key);  // readers waiting for it decode it themselves
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
    return pin(&table_, &s, key, e.bytes.get());
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
      held_.sub(e.size);
      lock.lock();
      stripe_table::abandon(s, key);
      throw;
    }
    lock.lock();
  }

  // Reserves `bytes` of the budget, evicting until they fit (spent_only: only spent chunks);
  // `reused` receives an evicted buffer of that size, if any. No stripe lock held.
  bool reserve(std::size_t bytes, std::unique_ptr<std::byte[]>& reused,
               bool spent_only = false) noexcept {
    if (bytes > held_.budget()) return false;
    if (held_.take_spare(bytes, reused)) return true;  // its bytes are counted already
    for (;;) {
      if (held_.try_add(bytes)) return true;
      if (held_.free_one_spare()) continue;
      // Spent chunks first, then readers' idle scratch (reallocated by their next decode), then
      // chunks still to be read (decoded again when read).
      if (table_.evict_one(reused, bytes, /*spent_only=*/true)) continue;
      if (spent_only) return false;
      if (give_back_idle(nullptr)) continue;
      if (!table_.evict_one(reused, bytes, false)) return false;
    }
  }

  byte_budget held_;               // held bytes, their peak, spare buffers
  stripe_table table_{held_};      // the chunks; evictions give their bytes back to held_
  std::mutex overflow_mutex_;
  byte_buffer overflow_;  // a chunk decoded outside the budget, under overflow_mutex_
  std::mutex scratch_overflow_mutex_;  // a decode whose scratch the budget cannot hold
  scratch_registry scratch_;
  std::atomic<std::uint64_t> direct_chunks_{0}, direct_bytes_{0}, records_{0}, delivered_{0};
};

}  // namespace gpufeed::detail::unit_cache
