// gpufeed — the overlapped loader: loader<Source, Options>.
//
//   gpufeed::hdf5_source src("train.h5");
//   gpufeed::loader<gpufeed::hdf5_source, gpufeed::loader_options<12, 8, 2>> feed(
//       src, {.batch_size = 256, .target = gpufeed::cuda::device(0), .consumer_stream = s});
//   for (auto& b : feed.epoch()) my_kernel<<<g, t, 0, s>>>(b.data().data(), b.size());
//
// Workers read records straight into pinned batch slots (one host copy), each batch crosses
// PCIe in one copy on one of `Streams` streams, and the consumer's stream waits on the batch's
// ready event — no host synchronisation in steady state (docs/design.md, "Data path").
//
// Compile-time tuning: loader_options<Workers, Prefetch, Streams>; `dynamic` defers a value to
// loader_config (workers, prefetch, streams). Prefetch = batches that may be in flight between
// the planner and the consumer; pinned memory = Prefetch slots, allocated once.
//
// Lifetime: the source must outlive the loader. Batches may outlive the loader (their slots are
// kept until released), but are best released first. Destroying a loader mid-epoch stops its
// threads promptly (at most one chunk of reads per worker) and waits only for copies already
// queued on its streams.
#pragma once

#include <algorithm>
#include <concepts>
#include <iterator>
#include <memory_resource>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <thread>
#include <utility>

#include "gpufeed/batch.hpp"
#include "gpufeed/detail/loader/pipeline.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/sampler.hpp"
#include "gpufeed/source.hpp"
#include "gpufeed/stats.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed {

// "Chosen at run time" for a loader_options parameter (like std::dynamic_extent).
inline constexpr std::size_t dynamic = std::numeric_limits<std::size_t>::max();

template <std::size_t Workers = dynamic, std::size_t Prefetch = dynamic,
          std::size_t Streams = dynamic>
struct loader_options {
  static constexpr std::size_t workers = Workers;
  static constexpr std::size_t prefetch = Prefetch;
  static constexpr std::size_t streams = Streams;
  static_assert(Workers == dynamic || (Workers >= 1 && Workers <= 1024),
                "loader_options: Workers must be 1..1024 (or gpufeed::dynamic)");
  static_assert(Prefetch == dynamic || (Prefetch >= 1 && Prefetch <= 256),
                "loader_options: Prefetch must be 1..256 batches (or gpufeed::dynamic)");
  static_assert(Streams == dynamic || (Streams >= 1 && Streams <= 32),
                "loader_options: Streams must be 1..32 (or gpufeed::dynamic)");
};

// Common set-ups. io_bound: many workers for page-cache/storage reads of small records;
// decode_bound: compressed shards, where workers decompress; latency: shallow prefetch for
// inference with small batches.
using default_options = loader_options<>;
using io_bound_options = loader_options<16, 8, 2>;
using decode_bound_options = loader_options<dynamic, 6, 2>;
using latency_options = loader_options<4, 2, 1>;

template <class T>
concept loader_options_type = requires {
  { T::workers } -> std::convertible_to<std::size_t>;
  { T::prefetch } -> std::convertible_to<std::size_t>;
  { T::streams } -> std::convertible_to<std::size_t>;
};

struct loader_config {
  std::size_t batch_size = 256;
  ::gpufeed::target target = ::gpufeed::target::host();
  bool drop_last = false;
  std::uint64_t seed = 0;
  sample_order order = sample_order::shuffled;
  std::optional<partition> part;          // nullopt: from the launcher's environment
  std::uint64_t epochs = 0;               // stop after this many epochs; 0 = never
  std::optional<sampler_state> resume;    // continue from a saved state (its seed wins)
  error_policy on_error = error_policy::throw_error;
  // Used only where the matching loader_options parameter is `dynamic`; 0 = default
  // (workers: hardware threads - 2, prefetch: 8, streams: 2).
  std::size_t workers = 0, prefetch = 0, streams = 0;
  std::size_t max_held_batches = 2;       // batches the consumer may hold at once
  // Record bytes per slot for sources whose records vary; 0 = batch_size x max_record_size().
  std::size_t slot_data_bytes = 0;
  std::size_t chunk_records = 0;          // records per worker task; 0 = automatic
  stream_handle consumer_stream = nullptr;  // the stream that consumes batches (device targets)
  transform_hook transform;               // runs after the copy, before hand-off
  std::size_t transform_output_bytes = 0;  // per-batch output buffer for the transform
  // Where host slots come from; nullptr = pinned memory on device targets, pageable on the host
  // target. On a device target it must be pinned (e.g. a counting_resource over
  // cuda::pinned_resource) or copies lose their asynchrony.
  std::pmr::memory_resource* staging_memory = nullptr;
  // Record a timeline for write_trace(): up to this many events per track (workers, planner,
  // consumer, streams); 0 = off. Tracing costs a clock read and a push_back per event.
  std::size_t trace_events = 0;
};

template <source Source, loader_options_type Options = default_options>
class loader {
 public:
  loader(const Source& src, loader_config config) {
    // Default workers: all cores but two, which the planner, the consumer and the CUDA runtime's
    // callback thread need (16 workers on the 16-core H200 host lost ~8 % to run-queue waits).
    const unsigned cores = std::thread::hardware_concurrency();
    const std::size_t workers = pick(Options::workers, config.workers, cores > 3 ? cores - 2 : 1);
    const std::size_t prefetch = pick(Options::prefetch, config.prefetch, 8);
    const std::size_t streams = pick(Options::streams, config.streams, 2);
    if (config.batch_size == 0) throw config_error("batch_size must be at least 1");
    if (config.max_held_batches == 0) throw config_error("max_held_batches must be at least 1");
    if (config.transform_output_bytes && !config.transform)
      throw config_error("transform_output_bytes given without a transform");

    sampler_options so;
    so.order = config.order;
    so.seed = config.resume ? config.resume->seed : config.seed;
    so.drop_last = config.drop_last;
    so.part = config.part;
    sampler smp(src.size(), config.batch_size, so);
    if (smp.batches_per_epoch() == 0)
      throw config_error("no full batch of " + std::to_string(config.batch_size) +
                         " records per epoch with drop_last (" +
                         std::to_string(smp.records_per_epoch()) + " records per rank)");

    detail::pipeline_config pc;
    pc.workers = workers;
    pc.prefetch = prefetch;
    pc.streams = streams;
    pc.max_held = config.max_held_batches;
    pc.epochs = config.epochs;
    pc.record_bytes = fixed_record_size(src);
    pc.layout.batch_size = config.batch_size;
    pc.layout.data_capacity = slot_data_bytes(src, config, pc.record_bytes);
    pc.chunk_records = config.chunk_records
                           ? config.chunk_records
                           : auto_chunk(config.batch_size, pc.layout.data_capacity, workers,
                                        prefetch);
    pc.unit_tasks = decode_unit_source<Source> && config.chunk_records == 0 &&
                    config.order == sample_order::sequential;
    pc.output_bytes = config.transform_output_bytes;
    pc.labels = has_labels(src);
    pc.policy = config.on_error;
    pc.consumer = config.consumer_stream;
    pc.hook = std::move(config.transform);
    pc.staging = config.staging_memory;
    pc.trace_capacity = config.trace_events;
    if (config.resume) {
      pc.start = *config.resume;
      if (pc.start.batch >= smp.batches_per_epoch())
        throw config_error("resume state names batch " + std::to_string(pc.start.batch) +
                           " but an epoch has " + std::to_string(smp.batches_per_epoch()));
    } else {
      pc.start = sampler_state{so.seed, 0, 0};
    }
    sampler_ = std::make_unique<sampler>(smp);
    pipeline_ = std::make_shared<detail::pipeline<Source>>(src, std::move(smp), std::move(pc),
                                                           config.target);
    pipeline_->start();
  }

  loader(loader&&) noexcept = default;
  loader& operator=(loader&& o) noexcept {
    loader tmp(std::move(o));
    std::swap(pipeline_, tmp.pipeline_);
    std::swap(sampler_, tmp.sampler_);
    return *this;
  }
  ~loader() {
    if (pipeline_) pipeline_->shutdown();
  }

  // The next batch, or nullopt once the configured number of epochs is done. Rethrows, at the
  // batch it broke, an error a worker or transform hit (policy throw_error).
  std::optional<batch> next() { return pipeline_->next(); }

  // Iterates the rest of the current epoch: `for (auto& b : l.epoch())`. Each batch is released
  // when the loop moves past it.
  class epoch_range;
  epoch_range epoch() { return epoch_range(*this); }

  // Where to resume so that the next batch is the one after the last next() returned.
  [[nodiscard]] sampler_state state() const { return pipeline_->state(); }
  [[nodiscard]] loader_stats stats() const { return pipeline_->stats(); }
  // The timeline as Chrome-trace JSON (open in Perfetto or chrome://tracing); needs
  // loader_config::trace_events. Tracks: one per worker, planner, consumer, and CUDA stream.
  void write_trace(std::ostream& os) const { pipeline_->write_trace(os); }
  [[nodiscard]] const sampler& batch_sampler() const noexcept { return *sampler_; }
  [[nodiscard]] std::uint64_t batches_per_epoch() const noexcept {
    return sampler_->batches_per_epoch();
  }

 private:
  static std::size_t pick(std::size_t compile_time, std::size_t run_time, std::size_t fallback) {
    if (compile_time != dynamic) return compile_time;
    return run_time ? run_time : fallback;
  }

  static std::size_t slot_data_bytes(const Source& src, const loader_config& c,
                                     std::size_t record_bytes) {
    if (c.slot_data_bytes) return c.slot_data_bytes;
    if (record_bytes) return record_bytes * c.batch_size;
    if constexpr (requires { src.max_record_size(); }) {
      return std::max<std::size_t>(1, src.max_record_size() * c.batch_size);
    } else {
      throw config_error("records vary in size and the source has no max_record_size(): set "
                         "loader_config::slot_data_bytes");
    }
  }

  // About 256 KiB of records per task, and enough tasks in the prefetch window (2 per worker)
  // that no worker idles because batches are fewer than workers.
  static std::size_t auto_chunk(std::size_t batch, std::size_t capacity, std::size_t workers,
                                std::size_t prefetch) {
    const std::size_t avg = std::max<std::size_t>(1, capacity / batch);
    const std::size_t by_bytes = std::max<std::size_t>(1, (256u << 10) / avg);
    const std::size_t min_chunks = (2 * workers + prefetch - 1) / prefetch;
    const std::size_t by_parallelism = std::max<std::size_t>(1, (batch + min_chunks - 1) / min_chunks);
    return std::clamp<std::size_t>(std::min(by_bytes, by_parallelism), 1, batch);
  }

  std::shared_ptr<detail::pipeline<Source>> pipeline_;
  std::unique_ptr<sampler> sampler_;
};

template <source Source, loader_options_type Options>
class loader<Source, Options>::epoch_range {
 public:
  class iterator {
   public:
    using value_type = batch;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    explicit iterator(loader* l) : loader_(l) { current_ = loader_->next(); }
    batch& operator*() { return *current_; }
    iterator& operator++() {
      const bool last = current_->last_in_epoch();
      current_.reset();  // releases the batch
      if (!last) current_ = loader_->next();
      return *this;
    }
    bool operator==(std::default_sentinel_t) const noexcept { return !current_.has_value(); }

   private:
    loader* loader_ = nullptr;
    std::optional<batch> current_;
  };

  explicit epoch_range(loader& l) : loader_(&l) {}
  iterator begin() { return iterator(loader_); }
  std::default_sentinel_t end() const noexcept { return {}; }

 private:
  loader* loader_;
};

}  // namespace gpufeed
