// gpufeed — a remote shard's reads in units of object-store size: a byte source over the shard's
// HTTP(S) reader that serves its data from whole units, each fetched with one ranged GET, kept
// while it is read and let go once every byte of it that reads need was delivered.
//
// Why: a record of a few KiB read with its own ranged GET pays a round trip (milliseconds to an
// object store) for a few KiB. The units are the order's units (hdf5 decode_unit gives a remote
// shard's records bands of about fetch_unit_bytes, hdf5/remote_units.hpp), and block_shuffled
// reads every record of a unit within one window: one request per unit per epoch.
//
// Contract:
//  - set_units(units), once before reads begin: sorted, disjoint extents; a read inside one is
//    served from it, others (HDF5 metadata, labels) go to the inner source as they are. A unit's
//    `need` is the bytes of it reads will take (a chunked shard's units may hold gaps).
//  - mode(m) (unit_extent.hpp's unit_mode, from the loader's order): each_read sends reads to the
//    inner source as they are (shuffled); sequential also reads ahead of units entered in turn.
//  - A unit is let go once the bytes delivered from it reach its need (each record or chunk of it
//    read once); the next epoch fetches it again. Bytes held are bounded (hold_bytes): a fetch
//    past it lets go of the oldest units no read is copying from, spent or not.
//  - will_need(offset, bytes) queues the units it overlaps for read-ahead threads (up to
//    ahead_requests per object, only while units are queued), which fetch them while they fit,
//    unless fetched since they were queued; it never blocks. A unit being fetched is waited for
//    by its readers, never fetched twice at once.
//  - A unit fetch that fails is not kept: the read that needed it reads its own bytes from the
//    inner source, whose error (naming the URL and the request) the seam reports.
//  - A local copy (local_copy: the node-local cache under the inner source) serves a read of a
//    unit no thread has fetched straight into the reader's buffer when it holds the bytes, and
//    read-ahead skips the units it holds: held bytes are not copied through a unit. What it
//    does not hold (or holds damaged) is fetched in units as above.
//  - close() waits for read-ahead fetches in flight, then closes the inner source; reopen()
//    reopens it. Units held stay (the version opened: http_file pins it).
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/detail/remote/transfer_stats.hpp"
#include "gpufeed/detail/remote/unit_extent.hpp"

namespace gpufeed::detail::remote {

// Bytes of the object held locally besides the remote copy: holds(offset, n) whether all of
// [offset, offset + n) are (advice), read(dst, n, offset) reads what is held from offset on
// (bytes read, 0 when none). Both empty: nothing is.
struct local_copy {
  std::function<bool(std::uint64_t, std::uint64_t)> holds;
  std::function<std::size_t(void*, std::size_t, std::uint64_t)> read;
};

class unit_reads final : public io::byte_source {
 public:
  // Over `inner`; `transfers` says what its requests came to (empty: nothing to say); `local`
  // what of it is held locally.
  explicit unit_reads(io::owned_source inner, std::function<transfer_stats()> transfers = {},
                      std::size_t hold_bytes = unit_hold_bytes, local_copy local = {})
      : inner_(std::move(inner)),
        transfers_(std::move(transfers)),
        hold_(hold_bytes),
        local_(std::move(local)) {}

  unit_reads(const unit_reads&) = delete;
  unit_reads& operator=(const unit_reads&) = delete;
  ~unit_reads() override {  // read-ahead requests in flight end within their timeouts
    std::unique_lock<std::mutex> g(mu_);
    stop_ = true;
    cv_.wait(g, [&] { return ahead_threads_ == 0; });
  }

  void set_units(std::vector<unit_extent> units) {
    extents_ = std::move(units);
    units_ = std::vector<unit>(extents_.size());
  }
  void mode(unit_mode m) const noexcept { mode_.store(m, std::memory_order_relaxed); }

  [[nodiscard]] std::uint64_t size() const noexcept override { return inner_.size(); }
  [[nodiscard]] const std::string& name() const noexcept override { return inner_.name(); }

  // Queues the units of [offset, offset + bytes) for read-ahead (unit_read_ahead.hpp).
  void will_need(std::uint64_t offset, std::uint64_t bytes) const noexcept override;

  void close() noexcept override {
    std::unique_lock<std::mutex> g(mu_);
    closed_ = true;
    cv_.wait(g, [&] { return ahead_threads_ == 0; });
    inner_.close();
  }
  void reopen() override {
    inner_.reopen();
    std::lock_guard<std::mutex> g(mu_);
    closed_ = false;
    start_read_ahead();
  }

  // This object's part of remote_stats (remote is set).
  [[nodiscard]] remote_stats stats() const {
    remote_stats r;
    r.remote = true;
    if (transfers_) copy_transfers(transfers_(), r);
    r.bytes_delivered = delivered_.load(std::memory_order_relaxed);
    r.unit_fetches = fetches_.load(std::memory_order_relaxed);
    r.unit_prefetches = prefetches_.load(std::memory_order_relaxed);
    r.unit_hits = hits_.load(std::memory_order_relaxed);
    r.read_wait_seconds = static_cast<double>(wait_us_.load(std::memory_order_relaxed)) / 1e6;
    return r;
  }

 protected:
  io::read_attempt read_some(void* dst, std::size_t n,
                             std::uint64_t offset) const noexcept override {
    if (const std::size_t k = served_unit(offset); k < units_.size())
      return from_unit(k, static_cast<std::byte*>(dst), n, offset);
    iovec part{dst, n};
    return direct(std::span<iovec>(&part, 1), offset);
  }
  io::read_attempt read_some_scatter(const iovec* parts, std::size_t count,
                                     std::uint64_t offset) const noexcept override {
    if (const std::size_t k = served_unit(offset); k < units_.size())
      return from_unit(k, static_cast<std::byte*>(parts[0].iov_base), parts[0].iov_len, offset);
    std::array<iovec, scatter_parts> copy;
    std::copy(parts, parts + count, copy.begin());
    return direct(std::span<iovec>(copy.data(), count), offset);
  }
  [[nodiscard]] const char* api(bool /*scatter*/) const noexcept override { return failed_api; }

 private:
  struct unit {
    enum state_kind : unsigned char { absent, fetching, ready } state = absent;
    std::unique_ptr<std::byte[]> bytes;
    std::uint64_t delivered = 0;
    std::uint32_t readers = 0;  // threads copying from bytes (it stays while any does)
    std::uint64_t fetched = 0;  // fetches of it so far: tells order_'s stale entries apart
  };
  struct held_unit {
    std::size_t k = 0;
    std::uint64_t fetched = 0;
  };

  // The first unit that ends after `offset`; the unit holding it (units_.size() when none, or
  // when units are not fetched whole).
  [[nodiscard]] std::size_t first_after(std::uint64_t offset) const noexcept {
    return static_cast<std::size_t>(
        std::partition_point(extents_.begin(), extents_.end(),
                             [&](const unit_extent& e) { return e.end <= offset; }) -
        extents_.begin());
  }
  [[nodiscard]] std::size_t unit_of(std::uint64_t offset) const noexcept {
    const std::size_t k = first_after(offset);
    return k < units_.size() && extents_[k].begin <= offset ? k : units_.size();
  }
  [[nodiscard]] std::size_t served_unit(std::uint64_t offset) const noexcept {
    if (units_.empty() || mode_.load(std::memory_order_relaxed) == unit_mode::each_read)
      return units_.size();
    return unit_of(offset);
  }
  [[nodiscard]] std::uint64_t length(std::size_t k) const noexcept {
    return extents_[k].end - extents_[k].begin;
  }
  // Whether the local copy holds unit k (no lock needed: extents_ are fixed once reads begin).
  [[nodiscard]] bool held_locally(std::size_t k) const noexcept {
    return local_.holds && local_.holds(extents_[k].begin, length(k));
  }

  // A read the inner source serves as it is: one attempt's worth, its failure's api kept for the
  // seam's error (a thread's own).
  io::read_attempt direct(std::span<iovec> parts, std::uint64_t offset) const noexcept {
    std::size_t n = 0;
    for (const iovec& p : parts) n += p.iov_len;
    const auto t0 = std::chrono::steady_clock::now();
    const io::read_outcome o = inner_.source().try_read_scatter(parts, offset);
    waited(t0);
    if (o.why == io::read_outcome::stop::failed) {
      failed_api = o.api;
      return {0, o.err ? o.err : EIO};
    }
    const std::size_t got = o.ok() ? n : static_cast<std::size_t>(o.at - offset);
    delivered_.fetch_add(got, std::memory_order_relaxed);
    return {got, 0};
  }

  void waited(std::chrono::steady_clock::time_point t0) const noexcept {
    const auto took = std::chrono::steady_clock::now() - t0;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
    wait_us_.fetch_add(static_cast<std::uint64_t>(us > 0 ? us : 0), std::memory_order_relaxed);
  }

  // Copies what unit k holds from `offset` on (up to n bytes), fetching the unit first when no
  // thread has; a fetch that fails leaves the read to the inner source.
  io::read_attempt from_unit(std::size_t k, std::byte* dst, std::size_t n,
                             std::uint64_t offset) const noexcept {
    unit& u = units_[k];
    std::unique_lock<std::mutex> g(mu_);
    if (k != entered_ && mode_.load(std::memory_order_relaxed) == unit_mode::sequential) {
      if (k == entered_ + 1) queue_after(k);
      entered_ = k;
    }
    if (u.state == unit::absent && local_.read) {
      g.unlock();
      const auto want = static_cast<std::size_t>(
          std::min<std::uint64_t>(n, extents_[k].end - offset));
      if (const std::size_t got = local_.read(dst, want, offset); got > 0) {
        delivered_.fetch_add(got, std::memory_order_relaxed);
        return {got, 0};
      }
      g.lock();  // not held: fetched in its unit (unless a thread did meanwhile)
    }
    if (u.state != unit::ready) {
      const auto t0 = std::chrono::steady_clock::now();
      while (u.state == unit::fetching) cv_.wait(g);
      if (u.state == unit::absent && !fetch(k, g)) {
        g.unlock();
        waited(t0);
        iovec part{dst, n};
        return direct(std::span<iovec>(&part, 1), offset);
      }
      waited(t0);
    } else {
      hits_.fetch_add(1, std::memory_order_relaxed);
    }
    ++u.readers;
    g.unlock();
    const std::uint64_t within = offset - extents_[k].begin;
    const auto got = static_cast<std::size_t>(std::min<std::uint64_t>(n, length(k) - within));
    std::memcpy(dst, u.bytes.get() + within, got);
    delivered_.fetch_add(got, std::memory_order_relaxed);
    g.lock();
    --u.readers;
    u.delivered += got;
    if (u.delivered >= extents_[k].need && u.readers == 0) let_go(k);
    return {got, 0};
  }

  // Fetches unit k whole (state absent, lock held; dropped while the request runs): true when
  // it is ready. Read-ahead (ahead) counts it as such.
  bool fetch(std::size_t k, std::unique_lock<std::mutex>& g, bool ahead = false) const noexcept {
    unit& u = units_[k];
    u.state = unit::fetching;
    const std::uint64_t len = length(k);
    make_room(len);
    held_ += len;
    g.unlock();
    std::unique_ptr<std::byte[]> b;
    bool ok = false;
    try {
      b.reset(new std::byte[static_cast<std::size_t>(len)]);
      ok = inner_.source().try_read(b.get(), static_cast<std::size_t>(len), extents_[k].begin).ok();
    } catch (...) {
    }
    g.lock();
    if (ok) {
      u.bytes = std::move(b);
      u.delivered = 0;
      u.state = unit::ready;
      if (order_.size() > 2 * units_.size() + 16) compact();
      try {
        order_.push_back({k, ++u.fetched});
      } catch (...) {  // not listed: let go when spent, never for room
      }
      fetches_.fetch_add(1, std::memory_order_relaxed);
      if (ahead) prefetches_.fetch_add(1, std::memory_order_relaxed);
    } else {
      u.state = unit::absent;
      held_ -= len;
    }
    cv_.notify_all();
    return ok;
  }

  [[nodiscard]] bool current(const held_unit& h) const noexcept {
    return units_[h.k].state == unit::ready && units_[h.k].fetched == h.fetched;
  }
  // Drops order_'s entries of units let go since.
  void compact() const noexcept {
    std::erase_if(order_, [&](const held_unit& h) { return !current(h); });
  }
  // Lets go of held units, oldest first, that no thread copies from, until `len` more fits
  // (units being copied from are passed over and stay).
  void make_room(std::uint64_t len) const noexcept {
    for (std::size_t tries = order_.size(); held_ + len > hold_ && tries > 0; --tries) {
      const held_unit h = order_.front();
      order_.pop_front();
      if (!current(h)) continue;
      if (units_[h.k].readers == 0)
        let_go(h.k);
      else
        order_.push_back(h);
    }
  }
  void let_go(std::size_t k) const noexcept {
    unit& u = units_[k];
    if (u.state != unit::ready) return;
    u.bytes.reset();
    u.state = unit::absent;
    u.delivered = 0;
    held_ -= length(k);
  }

  // Read-ahead (unit_read_ahead.hpp). Starts read-ahead threads (lock held), up to
  // ahead_requests and the units queued; each fetches queued units still absent, not fetched
  // since queued, not held locally and that fit, and ends when the queue is empty (no idle
  // threads per object).
  void start_read_ahead() const noexcept;
  // Queues the ahead_requests units after k (lock held) and starts read-ahead for them.
  void queue_after(std::size_t k) const noexcept;
  void read_ahead() const noexcept;

  io::owned_source inner_;
  std::function<transfer_stats()> transfers_;
  std::size_t hold_;
  local_copy local_;
  std::vector<unit_extent> extents_;
  mutable std::atomic<unit_mode> mode_{unit_mode::windows};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable std::vector<unit> units_;
  mutable std::deque<held_unit> order_;  // units in the order they were fetched
  mutable std::deque<held_unit> queue_;  // units to fetch ahead, as fetched when queued
  mutable std::uint64_t held_ = 0;
  mutable bool stop_ = false, closed_ = false;
  mutable std::size_t ahead_threads_ = 0;
  mutable std::size_t entered_ = ~std::size_t{0};  // the unit a read entered last (sequential)
  mutable std::atomic<std::uint64_t> delivered_{0}, fetches_{0}, prefetches_{0}, hits_{0},
      wait_us_{0};
  static inline thread_local const char* failed_api = "read";
};

}  // namespace gpufeed::detail::remote

#include "gpufeed/detail/remote/unit_read_ahead.hpp"  // unit_reads' read-ahead members
