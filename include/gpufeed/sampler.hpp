// gpufeed — which records go in which batch: one global sequence per (seed, epoch), ranks taking
// interleaved batches of it.
//
// Order (detail/order/sequence.hpp): each epoch is a sequence of N positions, a bijection onto the
// records that depends on (seed, epoch) only — never on rank, world size, workers, prefetch or
// streams.
//   sequential      record order.
//   shuffled        full random: a keyed permutation of [0, N) in O(1) memory. On a source whose
//                   decode units hold many records (HDF5 chunks of many rows) every record read
//                   at random decodes its whole unit; the loader then prints a one-time notice
//                   and loader_stats::records_per_decode_unit says so.
//   block_shuffled  random at the level of units — contiguous record ranges that never split a
//                   decode unit (for compressed HDF5 the band of chunks covering the same rows)
//                   and hold at least a storage block (1 MiB of records; detail/order/units.hpp).
//                   The units are permuted per (seed, epoch); each run of `window` consecutive
//                   permuted units forms a window whose records are shuffled together. A window's
//                   records take consecutive positions, so each unit is read and decoded once per
//                   epoch per rank when a cache holds one window. Memory: 16 bytes per unit.
//
// Ranks: a round is the next world x batch_size positions; rank r takes the r-th batch_size of
// them (interleaved batches, as Mosaic Streaming and torchdata do). The state is therefore
// (seed, epoch, position): the global position where the next round starts — identical on every
// rank after every step, and meaningful at any world size or batch size, so a loader at another
// world size resumes with exactly the records not yet delivered this epoch, each once.
// The epoch's last round, when fewer than world x batch_size positions remain:
//   drop_last = false: each rank gets ceil(remaining / world) positions; positions past N wrap to
//     the epoch's first ones, so fewer than `world` records are delivered twice in that epoch
//     (as PyTorch's DistributedSampler pads). Every rank runs the same number of batches, and a
//     rank's last batch may be short.
//   drop_last = true: the remaining records are not delivered this epoch (they differ by epoch
//     when the order is random); every batch is full.
// Every rank runs the same number of batches from any state (collectives in the training step
// would deadlock otherwise). Resuming requires the same records, order, seed and window; the
// world size, batch size, workers, prefetch and streams may all change.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "gpufeed/detail/launcher_env.hpp"
#include "gpufeed/detail/order/sequence.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/sample_order.hpp"

namespace gpufeed {

// This process's place among the training processes.
struct partition {
  std::uint32_t rank = 0;
  std::uint32_t world = 1;

  // From the launcher's environment (torchrun, Open MPI, MPICH/Intel MPI, SLURM; see
  // detail/launcher_env.hpp); rank 0 of 1 when none is set. Throws config_error on malformed or
  // inconsistent values.
  static partition from_environment() {
    const auto rw = detail::rank_world_from_environment();
    return partition{rw.rank, rw.world};
  }
};

struct sampler_options {
  sample_order order = sample_order::shuffled;
  std::uint64_t seed = 0;
  bool drop_last = false;
  std::optional<partition> part;  // nullopt: partition::from_environment()
  std::uint64_t window = 16;      // block_shuffled: units shuffled together (clamped to 1..units)
};

// Where the ranks are in the epoch sequence: the next round starts at global `position` of
// `epoch`. The same on every rank; valid at any world size.
struct sampler_state {
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  std::uint64_t position = 0;
  friend bool operator==(const sampler_state&, const sampler_state&) = default;
};

class sampler {
 public:
  // `units` are block_shuffled's (detail::units_of(source, ...)); none: units of one record.
  sampler(std::uint64_t records, std::uint64_t batch_size, sampler_options options = {},
          record_units units = {})
      : records_(records), batch_size_(batch_size), options_(std::move(options)),
        part_(options_.part ? *options_.part : partition::from_environment()) {
    if (batch_size_ == 0) throw config_error("batch size must be at least 1");
    if (part_.world == 0 || part_.rank >= part_.world)
      throw config_error("rank " + std::to_string(part_.rank) + " is not below world size " +
                         std::to_string(part_.world));
    if (records_ < part_.world)
      throw config_error(std::to_string(records_) + " records cannot be split over " +
                         std::to_string(part_.world) + " ranks");
    if (units.records() == 0) units = record_units::uniform(records_, 1);
    if (units.records() != records_)
      throw config_error("the order's units cover " + std::to_string(units.records()) +
                         " records, the source has " + std::to_string(records_));
    sequence_ = detail::epoch_sequence(options_.order, records_, options_.seed, std::move(units),
                                       options_.window);
    round_ = std::uint64_t{part_.world} * batch_size_;
  }

  [[nodiscard]] std::uint64_t records() const noexcept { return records_; }
  [[nodiscard]] std::uint64_t batch_size() const noexcept { return batch_size_; }
  [[nodiscard]] const partition& part() const noexcept { return part_; }
  [[nodiscard]] const sampler_options& options() const noexcept { return options_; }
  // block_shuffled's units and window (units shuffled together, after clamping).
  [[nodiscard]] const record_units& units() const noexcept { return sequence_.units(); }
  [[nodiscard]] std::uint64_t window() const noexcept { return sequence_.window(); }

  // block_shuffled's windows: how many an epoch has, the one holding global `position` of
  // `epoch`, and f(unit) for each unit of window w (units() gives their records).
  [[nodiscard]] std::uint64_t windows_per_epoch() const noexcept { return sequence_.windows(); }
  [[nodiscard]] std::uint64_t window_of(std::uint64_t epoch, std::uint64_t position) const {
    return sequence_.window_of(epoch, position % records_);
  }
  // Global positions [first, second) of window w of `epoch`.
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> window_bounds(std::uint64_t epoch,
                                                                      std::uint64_t w) const {
    return sequence_.window_bounds(epoch, w);
  }
  template <class F>
  void for_each_window_unit(std::uint64_t epoch, std::uint64_t w, F&& f) const {
    sequence_.for_each_unit(epoch, w, std::forward<F>(f));
  }

  // The state at the start of the first epoch.
  [[nodiscard]] sampler_state first_state() const noexcept { return {options_.seed, 0, 0}; }

  // Batches this rank (every rank) delivers from `s` to the end of s's epoch.
  [[nodiscard]] std::uint64_t batches_left(const sampler_state& s) const noexcept {
    if (s.position >= records_) return 0;
    const std::uint64_t remaining = records_ - s.position;
    return options_.drop_last ? remaining / round_ : (remaining + round_ - 1) / round_;
  }
  // Batches per whole epoch (the same on every rank).
  [[nodiscard]] std::uint64_t batches_per_epoch() const noexcept {
    return batches_left(first_state());
  }
  // Records this rank delivers per whole epoch (the same on every rank).
  [[nodiscard]] std::uint64_t records_per_epoch() const noexcept {
    const std::uint64_t full = records_ / round_;
    if (options_.drop_last) return full * batch_size_;
    return full * batch_size_ + (records_ % round_ + part_.world - 1) / part_.world;
  }

  // Records in this rank's batch of the round at `s` (0 when s's epoch has no round left).
  [[nodiscard]] std::uint64_t batch_records(const sampler_state& s) const noexcept {
    if (batches_left(s) == 0) return 0;
    return span_at(s.position).second;
  }
  // Records in batch b of a whole epoch at this world size.
  [[nodiscard]] std::uint64_t batch_records(std::uint64_t b) const noexcept {
    return b < batches_per_epoch() ? batch_records(sampler_state{options_.seed, 0, b * round_}) : 0;
  }

  // This rank's batch number within the epoch at `s`: rounds before s.position (exact when the
  // epoch has run at this world and batch size from its start).
  [[nodiscard]] std::uint64_t batch_number(const sampler_state& s) const noexcept {
    return s.position / round_;
  }

  // The record at global `position` (< records()) of `epoch`'s sequence.
  [[nodiscard]] std::uint64_t record_at(std::uint64_t epoch, std::uint64_t position) const {
    std::uint64_t r = 0;
    sequence_.fill(epoch, position % records_, std::span(&r, 1));
    return r;
  }

  // Writes the record indices of this rank's batch of the round at `s` to out; returns how many.
  // Throws config_error when s's epoch has no round left or out is too small.
  std::size_t batch(const sampler_state& s, std::span<std::uint64_t> out) const {
    const std::uint64_t n = batch_records(s);
    if (n == 0)
      throw config_error("position " + std::to_string(s.position) + " of epoch " +
                         std::to_string(s.epoch) + " is past the epoch's last round (" +
                         std::to_string(records_) + " records, rounds of " +
                         std::to_string(round_) + ")");
    if (out.size() < n) throw config_error("batch index buffer too small");
    sequence_.fill(s.epoch, span_at(s.position).first, out.first(static_cast<std::size_t>(n)));
    return static_cast<std::size_t>(n);
  }
  // Records [first, first + out.size()) of the batch batch(s, ...) writes, into out: what
  // batch() writes at out[first...], so that threads may each fill a part of one batch.
  // Thread-safe. Throws config_error when the part is not inside the batch.
  void batch_part(const sampler_state& s, std::uint64_t first, std::span<std::uint64_t> out) const {
    const std::uint64_t n = batch_records(s);
    if (first > n || out.size() > n - first)
      throw config_error("records " + std::to_string(first) + " to " +
                         std::to_string(first + out.size()) + " are not inside the batch of " +
                         std::to_string(n) + " records at position " +
                         std::to_string(s.position) + " of epoch " + std::to_string(s.epoch));
    sequence_.fill(s.epoch, span_at(s.position).first + first, out);
  }

  // Batch b of a whole `epoch` at this world size.
  std::size_t batch(std::uint64_t epoch, std::uint64_t b, std::span<std::uint64_t> out) const {
    if (b >= batches_per_epoch())
      throw config_error("batch " + std::to_string(b) + " is past the epoch's " +
                         std::to_string(batches_per_epoch()) + " batches");
    return batch(sampler_state{options_.seed, epoch, b * round_}, out);
  }

  // The state after the round at `s` (every rank's batch of it) has been delivered; rolls over
  // to the next epoch.
  [[nodiscard]] sampler_state advance(sampler_state s) const noexcept {
    s.position = records_ - s.position > round_ ? s.position + round_ : records_;
    return rolled(s);
  }

  // `s` as this sampler continues it: the next epoch when no round is left in s's epoch (e.g.
  // a state saved at another world size with drop_last). Throws config_error when s.position
  // is past the records, which a state of these records never is.
  [[nodiscard]] sampler_state resumed(sampler_state s) const {
    if (s.position > records_)
      throw config_error("resume state names position " + std::to_string(s.position) +
                         " but an epoch has " + std::to_string(records_) + " records");
    return rolled(s);
  }

 private:
  [[nodiscard]] sampler_state rolled(sampler_state s) const noexcept {
    if (batches_left(s) == 0) {
      ++s.epoch;
      s.position = 0;
    }
    return s;
  }

  // This rank's first position and record count in the round starting at `position`.
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> span_at(
      std::uint64_t position) const noexcept {
    const std::uint64_t remaining = records_ - position;
    const std::uint64_t b =
        remaining >= round_ ? batch_size_ : (remaining + part_.world - 1) / part_.world;
    return {position + part_.rank * b, b};
  }

  std::uint64_t records_;
  std::uint64_t batch_size_;
  sampler_options options_;
  partition part_;
  detail::epoch_sequence sequence_;
  std::uint64_t round_ = 1;
};

}  // namespace gpufeed
