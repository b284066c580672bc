// gpufeed::detail — read-ahead for the block_shuffled order: the planner advises the source
// (source.hpp's will_need: posix_fadvise / madvise WILLNEED) that every unit of the next window
// (window k + 1 of the epoch, or the next epoch's first) will be read, in shares spread over
// window k's batches as decode ahead's are (below), each given after the batch's tasks are
// queued; a window entered other than from the one before it (an epoch's, or a resume's, first)
// is advised whole before its first batch is queued. The kernel then reads those units whole and
// in file order while the workers read window k's records in shuffled order, so a first pass
// over shards evicted from the page cache reads at the device's sequential rate instead of its
// random 16 KiB rate. Advice over data already in the page cache still walks its pages (a
// millisecond or more per 128 MiB): spread and given behind the batches, it never holds back the
// planning of a batch the workers wait for, and an epoch of one window does not advise it whole
// at each epoch's start. One window ahead is enough: a window is the decoded-chunk cache's
// working set and takes far longer to consume than its read-ahead takes to queue; further ahead
// would only compete with the window being read for page cache. A batch whose records reach
// into the next window has that window's remaining units advised before it is queued. Other
// orders get no advice (sequential reads are the kernel's own read-ahead case; full random has
// nothing to read ahead of). The planner thread calls it; advice never blocks and never throws.
//
// Decode ahead: with a reader that can (decode_ahead_reader: hdf5_source), every batch planned in
// window k also yields its share of window k + 1 (or of the next epoch's first window): the
// slots of k + 1's units in proportion to how far the batch reaches into window k. The planner
// queues that share as decode-ahead tasks behind the batch, so window k + 1 is decoded evenly
// over window k's batches and is in the cache when k + 1 begins: its first batches, which touch
// nearly every unit of the window, are copies instead of a burst of decodes that the rest of
// the pipeline waits behind. Tasks are not part of any batch (a batch never waits for them);
// the workers decode their units' chunks into the source's cache, never evicting chunks still
// being read, and what they did not reach is decoded by the reads. A task that runs late (its
// worker descheduled, or busy with a long task) stops once a worker has begun to read the window
// it decodes ahead (ahead_of_reads, source.hpp): from then on that window's reads may have read
// a unit whole and let the cache evict it, and decoding it again would be a second decode of it
// in the epoch. Each batch carries the number of the last window its records lie in, and a
// worker marks it begun (reading()) before it reads any record of the batch.
// loader_config::decode_ahead (the cache then holds two windows); docs/design.md has the
// measurements. Decoding on the device, the same shares are staged for the device by tasks of
// the batch (stage_ahead): the batch's launch decodes them, so the next window's units are
// decoded a window early, in launches of many units, and its first batches only gather; only
// when the device plan stages windows ahead (device_decode_plan::window_ahead), else no batch
// gets a share.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <stop_token>
#include <utility>
#include <vector>

#include "gpufeed/detail/device_decode/batch_work.hpp"
#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/detail/loader/device_stage.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail::loading {

template <source Source>
class window_read_ahead {
 public:
  // True when the loader's workers decode windows ahead for this source and order.
  static bool decodes_ahead(const pipeline_setup& p) noexcept {
    return decode_ahead_reader<decltype(make_reader(std::declval<const Source&>()))> &&
           p.config.order == sample_order::block_shuffled && p.config.decode_ahead;
  }

  // `device`: the loader's device decode plan (null when it decodes on the host); its shares
  // are staged for the device, and there are none unless the plan stages windows ahead.
  window_read_ahead(const Source& src, const pipeline_setup& p,
                    const device_decode_plan* device = nullptr) noexcept
      : source_(src), order_(p.order), epochs_(p.config.epochs),
        advise_(read_ahead_source<Source> && p.config.order == sample_order::block_shuffled),
        decode_(decodes_ahead(p) && (device == nullptr || device->window_ahead)) {}

  // Slots [first, end) of window `window` of `epoch` (indices into the window's units, in the
  // order for_each_window_unit gives them), to decode ahead.
  struct ahead_share {
    std::uint64_t epoch = 0, window = 0, first = 0, end = 0;
  };

  // What planning() says of one batch: its share of the next window to decode ahead (none when
  // there is nothing to decode ahead), its share of the next window to advise (advise() it
  // before the batch is queued when advise_first, else after), and the mark its workers pass to
  // reading() before they read its records (0: nothing to mark).
  struct batch_plan {
    std::optional<ahead_share> ahead;
    std::optional<ahead_share> advice;
    bool advise_first = false;
    std::uint64_t reads_mark = 0;
  };

  // The planner is about to plan the batch of the round at `at`: advises the kernel when `at`
  // entered a new window, and says the batch's share of the next window to decode ahead and
  // the mark of the windows it reads.
  batch_plan planning(const sampler_state& at) noexcept {
    batch_plan b;
    if ((!advise_ && !decode_) || at.position >= order_.records()) return b;
    try {
      b.ahead = share(at, b);
    } catch (...) {
      advise_ = decode_ = false;  // advice only: an order that cannot say its windows gets none
      b = batch_plan{};
    }
    return b;
  }

  // Advises the units in slots [first, end) of a share planning() gave. Never throws.
  void advise(const std::optional<ahead_share>& a) const noexcept {
    if (!a) return;
    try {
      const record_units& u = order_.units();
      for (const std::uint64_t unit : units_of(a->epoch, a->window, a->first, a->end))
        will_need(source_, u.begin(unit), u.end(unit) - u.begin(unit));
    } catch (...) {
    }
  }

  // A worker is about to read records of a batch whose planning() gave `mark`: decoding ahead
  // for the windows up to the batch's last one stops (ahead_of_reads). Before the first read:
  // a decode ahead that finds a chunk absent under the lock a read of it takes then knows
  // whether such a read may have come first.
  void reading(std::uint64_t mark) noexcept {
    std::uint64_t now = reads_begun_.load(std::memory_order_relaxed);
    while (now < mark &&
           !reads_begun_.compare_exchange_weak(now, mark, std::memory_order_release,
                                               std::memory_order_relaxed)) {
    }
  }

  // Decodes ahead slots [first, end) of window w of `epoch` with the worker's reader. The units
  // are listed first and decoded after: the order's lock is not held while chunks decode. Once
  // `stop` is requested (the loader is being destroyed) no further unit starts: work for a
  // window nobody will read must not hold up the destructor. Once a worker has begun to read
  // window w, the reader enters no further chunk (ahead_of_reads). Never throws.
  template <class Reader>
  void decode_ahead(Reader& r, std::uint64_t epoch, std::uint64_t w, std::uint64_t first,
                    std::uint64_t end, const std::stop_token& stop = {}) const noexcept {
    if constexpr (decode_ahead_reader<Reader>) {
      try {
        const std::vector<std::uint64_t> units = units_of(epoch, w, first, end);
        const record_units& u = order_.units();
        const ahead_of_reads still_ahead(reads_begun_, number_of(epoch, w));
        for (const std::uint64_t unit : units) {
          if (stop.stop_requested() || !still_ahead()) return;
          r.decode_ahead(u.begin(unit), u.end(unit) - u.begin(unit), still_ahead);
        }
      } catch (...) {
      }
    } else {
      (void)r, (void)epoch, (void)w, (void)first, (void)end, (void)stop;
    }
  }

  // Decoding on the device: stages slots [first, end) of window w of `epoch` into batch work
  // `work` with the worker's reader (their units not held by the device cache yet), so the
  // batch's launch decodes them before the next window's batches gather from them. A unit the
  // reader cannot stage is left to the batch that reads it. Never throws.
  template <class Reader>
  void stage_ahead(Reader& r, std::uint64_t epoch, std::uint64_t w, std::uint64_t first,
                   std::uint64_t end, device_decode::batch_work& work,
                   device_decode::unit_directory& dir) const noexcept {
    try {
      const record_units& u = order_.units();
      for (const std::uint64_t unit : units_of(epoch, w, first, end))
        r.stage_device_unit(u.begin(unit), u.end(unit) - u.begin(unit), work, dir);
    } catch (...) {
    }
  }

 private:
  // The units in slots [first, end) of window w of `epoch`, listed first so that the order's
  // lock is not held while they are decoded or staged.
  std::vector<std::uint64_t> units_of(std::uint64_t epoch, std::uint64_t w, std::uint64_t first,
                                      std::uint64_t end) const {
    std::vector<std::uint64_t> units;
    units.reserve(static_cast<std::size_t>(end - first));
    std::uint64_t n = 0;
    order_.for_each_window_unit(epoch, w, [&](std::uint64_t unit) {
      if (n >= first && n < end) units.push_back(unit);
      ++n;
    });
    return units;
  }

  // planning()'s body: may throw (the order's tables).
  std::optional<ahead_share> share(const sampler_state& at, batch_plan& b) {
    const std::uint64_t w = order_.window_of(at.epoch, at.position);
    const bool last = w + 1 >= order_.windows_per_epoch();
    if (at.epoch != epoch_ || w != window_) {
      // Entered from the window before it (in the epoch, or the last of the epoch before): the
      // shares of the batches before advised it whole.
      const bool follows = (at.epoch == epoch_ && w == window_ + 1) ||
                           (at.epoch == epoch_ + 1 && w == 0 &&
                            window_ + 1 == order_.windows_per_epoch() && advised_next_epoch_);
      epoch_ = at.epoch;
      window_ = w;
      bounds_ = order_.window_bounds(at.epoch, w);
      if (advise_ && !follows) advise_whole(at.epoch, w);
    }
    const std::uint64_t round = std::uint64_t{order_.part().world} * order_.batch_size();
    const std::uint64_t end = std::min(order_.records(), at.position + round);
    const auto [lo, hi] = bounds_;
    ahead_share a;
    if (!last) {
      a.epoch = at.epoch;
      a.window = w + 1;
    } else {
      if (epochs_ && at.epoch + 1 >= epochs_) {
        if (decode_) reads_mark_of(at, w, end, b.reads_mark);
        return std::nullopt;
      }
      a.epoch = at.epoch + 1;
      a.window = 0;
    }
    // The batch after this one reaches fraction f of window w; decode ahead (and advise) the
    // slots of the next window up to f of its units, from where the previous batch's share
    // ended (a window entered by a jump, e.g. a resume, starts from its first slot). One batch
    // early: the last share then goes with a batch that reads only window w, not with one that
    // reaches into the next window (windows need not be aligned to batches), whose reads would
    // stop it.
    const std::uint64_t reach = std::min(hi, at.position + 2 * round) - lo;
    const std::uint64_t units = window_units(a.window);
    const std::uint64_t upto =
        reach >= hi - lo ? units
                         : static_cast<std::uint64_t>(static_cast<long double>(units) *
                                                      static_cast<long double>(reach) /
                                                      static_cast<long double>(hi - lo));
    if (advise_) {
      if (a.epoch != advise_epoch_ || a.window != advise_window_) advised_ = 0;
      advise_epoch_ = a.epoch;
      advise_window_ = a.window;
      advised_next_epoch_ = a.epoch != at.epoch && upto >= units;
      if (upto > advised_) {
        b.advice = ahead_share{a.epoch, a.window, advised_, upto};
        b.advise_first = end > hi;  // this batch reads into the next window
        advised_ = upto;
      }
    }
    if (!decode_) return std::nullopt;
    reads_mark_of(at, w, end, b.reads_mark);
    if (a.epoch != ahead_epoch_ || a.window != ahead_window_) ahead_done_ = 0;
    ahead_epoch_ = a.epoch;
    ahead_window_ = a.window;
    if (upto <= ahead_done_) return std::nullopt;
    a.first = ahead_done_;
    a.end = ahead_done_ = upto;
    return a;
  }

  // The mark of the last window the batch at `at` (in window w, ending at position `end`) reads.
  void reads_mark_of(const sampler_state& at, std::uint64_t w, std::uint64_t end,
                     std::uint64_t& mark) const {
    mark = 1 + number_of(at.epoch, end <= bounds_.second ? w : order_.window_of(at.epoch, end - 1));
  }

  // Window w of `epoch` numbered over epochs.
  [[nodiscard]] std::uint64_t number_of(std::uint64_t epoch, std::uint64_t w) const noexcept {
    return epoch * order_.windows_per_epoch() + w;
  }

  // Units in window w (the last window of an epoch may be short).
  [[nodiscard]] std::uint64_t window_units(std::uint64_t w) const noexcept {
    const std::uint64_t all = order_.units().size(), per = order_.window();
    return std::min(all, (w + 1) * per) - std::min(all, w * per);
  }

  void advise_whole(std::uint64_t epoch, std::uint64_t w) const {
    const record_units& u = order_.units();
    order_.for_each_window_unit(epoch, w, [&](std::uint64_t unit) {
      will_need(source_, u.begin(unit), u.end(unit) - u.begin(unit));
    });
  }

  static constexpr std::uint64_t none = std::numeric_limits<std::uint64_t>::max();
  const Source& source_;
  const sampler& order_;
  std::uint64_t epochs_;  // loader_config::epochs (0: unbounded)
  bool advise_, decode_;
  std::uint64_t epoch_ = none, window_ = none;                // the window being planned
  std::pair<std::uint64_t, std::uint64_t> bounds_;            // its positions
  std::uint64_t ahead_epoch_ = none, ahead_window_ = none;    // the window decoded ahead
  std::uint64_t ahead_done_ = 0;                              // its slots handed out so far
  std::uint64_t advise_epoch_ = none, advise_window_ = none;  // the window advised ahead
  std::uint64_t advised_ = 0;                                 // its slots advised so far
  bool advised_next_epoch_ = false;  // the next epoch's first window is advised whole
  // 1 + the largest number_of() of a window whose reads have begun (0: none yet); raised by the
  // workers (reading()), read by their decode-ahead tasks.
  std::atomic<std::uint64_t> reads_begun_{0};
};

}  // namespace gpufeed::detail::loading
