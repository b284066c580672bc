// gpufeed::detail — read-ahead for the block_shuffled order: when the planner enters window k
// of an epoch, it advises the source (source.hpp's will_need: posix_fadvise / madvise
// WILLNEED) that every unit of window k + 1 will be read, and at an epoch's (or a resume's)
// first window also window k itself. The kernel then reads those units whole and in file order
// while the workers read window k's records in shuffled order, so a first pass over shards
// evicted from the page cache reads at the device's sequential rate instead of its random 16 KiB
// rate. One window ahead is enough: a window is the decoded-chunk cache's working set and takes
// far longer to consume than its read-ahead takes to queue; further ahead would only compete
// with the window being read for page cache. Other orders get no advice (sequential reads are
// the kernel's own read-ahead case; full random has nothing to read ahead of).
// The planner thread calls it; advice never blocks and never throws.
//
// Decode ahead: with a reader that can (decode_ahead_reader: hdf5_source), entering window k
// also yields window k + 1 (or the next epoch's first) for the planner to queue as decode-ahead
// tasks, one part per worker, behind the batch it is planning. The workers decode those units'
// chunks into the source's cache (never evicting chunks still being read) while window k's
// batches are mostly copies of already decoded chunks. Without it a window's decode work comes
// in one burst at its first batches, the workers idle through the rest of it, and the prefetch
// depth cannot hide the burst: block_shuffled then ran at 0.68x the sequential rate on h5py's
// gzip file (H200, 2026-12-02).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail {

template <source Source>
class window_read_ahead {
 public:
  // True when the loader's workers decode windows ahead for this source and order.
  static bool decodes_ahead(const pipeline_setup& p) noexcept {
    return decode_ahead_reader<decltype(make_reader(std::declval<const Source&>()))> &&
           p.config.order == sample_order::block_shuffled;
  }

  window_read_ahead(const Source& src, const pipeline_setup& p) noexcept
      : source_(src), order_(p.order), epochs_(p.config.epochs),
        advise_(read_ahead_source<Source> && p.config.order == sample_order::block_shuffled),
        decode_(decodes_ahead(p)) {}

  // The window to decode ahead, when planning() entered a new one.
  struct next_window {
    std::uint64_t epoch = 0, window = 0;
  };

  // The planner is about to plan the batch of the round at `at`. Returns the window whose units
  // the workers should decode ahead, when `at` entered a new window and one follows it.
  std::optional<next_window> planning(const sampler_state& at) noexcept {
    if ((!advise_ && !decode_) || at.position >= order_.records()) return std::nullopt;
    try {
      const std::uint64_t w = order_.window_of(at.epoch, at.position);
      if (at.epoch == epoch_ && w == window_) return std::nullopt;
      const bool jumped = at.epoch != epoch_ || w != window_ + 1;
      epoch_ = at.epoch;
      window_ = w;
      const bool last = w + 1 >= order_.windows_per_epoch();
      if (advise_) {
        if (jumped) advise(at.epoch, w);
        if (!last) advise(at.epoch, w + 1);
      }
      ++windows_advised_;
      if (!decode_) return std::nullopt;
      if (!last) return next_window{at.epoch, w + 1};
      if (epochs_ && at.epoch + 1 >= epochs_) return std::nullopt;
      return next_window{at.epoch + 1, 0};
    } catch (...) {
      advise_ = decode_ = false;  // advice only: an order that cannot say its windows gets none
      return std::nullopt;
    }
  }

  // Decode-ahead task `part` of `parts` of window w of `epoch`: its share of the window's units
  // (every parts-th), decoded by the worker's reader. Never throws.
  template <class Reader>
  void decode_ahead(Reader& r, std::uint64_t epoch, std::uint64_t w, std::size_t part,
                    std::size_t parts) const noexcept {
    if constexpr (decode_ahead_reader<Reader>) {
      try {
        const record_units& u = order_.units();
        std::size_t n = 0;
        order_.for_each_window_unit(epoch, w, [&](std::uint64_t unit) {
          if (n++ % parts == part) r.decode_ahead(u.begin(unit), u.end(unit) - u.begin(unit));
        });
      } catch (...) {
      }
    } else {
      (void)r, (void)epoch, (void)w, (void)part, (void)parts;
    }
  }

  // Windows entered so far (tests).
  [[nodiscard]] std::uint64_t windows_entered() const noexcept { return windows_advised_; }

 private:
  void advise(std::uint64_t epoch, std::uint64_t w) const {
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
  std::uint64_t epoch_ = none, window_ = none;
  std::uint64_t windows_advised_ = 0;
};

}  // namespace gpufeed::detail
