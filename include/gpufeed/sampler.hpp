// gpufeed — which records go in which batch, per (seed, epoch), per rank.
//
// Order: `shuffled` applies a keyed pseudo-random permutation of [0, N) (detail/permutation.hpp),
// a different one for every (seed, epoch) and the same one every time for the same pair, in O(1)
// memory; `sequential` keeps record order.
//
// Partition: the epoch's sequence of N positions is cut into `world` contiguous blocks of equal
// length, one per rank, so every rank runs the same number of batches (collectives in the
// training step would deadlock otherwise):
//   drop_last = false: each rank gets ceil(N / world) positions; the last ranks' blocks wrap
//     around to the start of the sequence, so the union over ranks is the whole dataset and a
//     few records (fewer than `world`) are seen twice per epoch — as PyTorch's
//     DistributedSampler does. A rank's last batch may be short.
//   drop_last = true: each rank gets floor(N / world) positions and only full batches; the
//     records past the last full batch are not delivered this epoch (they differ by epoch when
//     shuffled).
// Within a rank, an epoch never repeats a record (given N >= world).
//
// State is (seed, epoch, batch): a sampler is stateless, so restoring that triple restores the
// exact remaining sequence whatever the loader's worker count, prefetch depth or stream count.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "gpufeed/detail/launcher_env.hpp"
#include "gpufeed/detail/permutation.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed {

enum class sample_order { shuffled, sequential };

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
};

// Where a loader is in its sequence of batches: the next batch to deliver.
struct sampler_state {
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  std::uint64_t batch = 0;
  friend bool operator==(const sampler_state&, const sampler_state&) = default;
};

class sampler {
 public:
  sampler(std::uint64_t records, std::uint64_t batch_size, sampler_options options = {})
      : records_(records), batch_size_(batch_size), options_(options),
        part_(options.part ? *options.part : partition::from_environment()) {
    if (batch_size_ == 0) throw config_error("batch size must be at least 1");
    if (part_.world == 0 || part_.rank >= part_.world)
      throw config_error("rank " + std::to_string(part_.rank) + " is not below world size " +
                         std::to_string(part_.world));
    if (records_ < part_.world)
      throw config_error(std::to_string(records_) + " records cannot be split over " +
                         std::to_string(part_.world) + " ranks");
    per_rank_ = options_.drop_last ? records_ / part_.world
                                   : (records_ + part_.world - 1) / part_.world;
    batches_ = options_.drop_last ? per_rank_ / batch_size_
                                  : (per_rank_ + batch_size_ - 1) / batch_size_;
  }

  [[nodiscard]] std::uint64_t records() const noexcept { return records_; }
  [[nodiscard]] std::uint64_t batch_size() const noexcept { return batch_size_; }
  [[nodiscard]] const partition& part() const noexcept { return part_; }
  [[nodiscard]] const sampler_options& options() const noexcept { return options_; }
  // Records this rank delivers per epoch (the same on every rank).
  [[nodiscard]] std::uint64_t records_per_epoch() const noexcept {
    return options_.drop_last ? batches_ * batch_size_ : per_rank_;
  }
  // Batches per epoch (the same on every rank).
  [[nodiscard]] std::uint64_t batches_per_epoch() const noexcept { return batches_; }

  // Records in batch b (batch_size except possibly the last one when !drop_last).
  [[nodiscard]] std::uint64_t batch_records(std::uint64_t b) const noexcept {
    if (b >= batches_) return 0;
    const std::uint64_t begin = b * batch_size_;
    const std::uint64_t end = std::min(begin + batch_size_, per_rank_);
    return end - begin;
  }

  // The record at `position` (0-based, < records_per_epoch()) of this rank's epoch sequence.
  [[nodiscard]] std::uint64_t record_at(std::uint64_t epoch, std::uint64_t position) const noexcept {
    const std::uint64_t global = (part_.rank * per_rank_ + position) % records_;
    if (options_.order == sample_order::sequential) return global;
    return detail::feistel_permutation(records_, epoch_key(epoch))(global);
  }

  // Writes the global record indices of batch b of `epoch` to out; returns how many.
  // Throws config_error when b is past the epoch or out is too small.
  std::size_t batch(std::uint64_t epoch, std::uint64_t b, std::span<std::uint64_t> out) const {
    const std::uint64_t n = batch_records(b);
    if (n == 0)
      throw config_error("batch " + std::to_string(b) + " is past the epoch's " +
                         std::to_string(batches_) + " batches");
    if (out.size() < n) throw config_error("batch index buffer too small");
    const std::uint64_t first = b * batch_size_;
    const std::uint64_t rank_base = part_.rank * per_rank_;
    if (options_.order == sample_order::sequential) {
      for (std::uint64_t k = 0; k < n; ++k) out[k] = (rank_base + first + k) % records_;
    } else {
      const detail::feistel_permutation perm(records_, epoch_key(epoch));
      for (std::uint64_t k = 0; k < n; ++k) out[k] = perm((rank_base + first + k) % records_);
    }
    return static_cast<std::size_t>(n);
  }

  // The state after `state`'s batch has been delivered (rolls over to the next epoch).
  [[nodiscard]] sampler_state advance(sampler_state s) const noexcept {
    if (++s.batch >= batches_) {
      s.batch = 0;
      ++s.epoch;
    }
    return s;
  }

 private:
  [[nodiscard]] std::uint64_t epoch_key(std::uint64_t epoch) const noexcept {
    return detail::mix64(options_.seed ^ detail::mix64(epoch + 0x243f6a8885a308d3ull));
  }

  std::uint64_t records_;
  std::uint64_t batch_size_;
  sampler_options options_;
  partition part_;
  std::uint64_t per_rank_ = 0;
  std::uint64_t batches_ = 0;
};

}  // namespace gpufeed
