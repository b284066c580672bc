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
#pragma once

#include <cstdint>
#include <limits>

#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail {

template <source Source>
class window_read_ahead {
 public:
  window_read_ahead(const Source& src, const pipeline_setup& p) noexcept
      : source_(src), order_(p.order),
        on_(read_ahead_source<Source> && p.config.order == sample_order::block_shuffled) {}

  // The planner is about to plan the batch of the round at `at`.
  void planning(const sampler_state& at) noexcept {
    if (!on_ || at.position >= order_.records()) return;
    try {
      const std::uint64_t w = order_.window_of(at.epoch, at.position);
      if (at.epoch == epoch_ && w == window_) return;
      const bool jumped = at.epoch != epoch_ || w != window_ + 1;
      epoch_ = at.epoch;
      window_ = w;
      if (jumped) advise(at.epoch, w);
      if (w + 1 < order_.windows_per_epoch()) advise(at.epoch, w + 1);
      ++windows_advised_;
    } catch (...) {
      on_ = false;  // advice only: an order that cannot say its windows gets none
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
  bool on_;
  std::uint64_t epoch_ = none, window_ = none;
  std::uint64_t windows_advised_ = 0;
};

}  // namespace gpufeed::detail
