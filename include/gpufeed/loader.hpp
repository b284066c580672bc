// gpufeed — the overlapped loader: loader<Source, Options>.
//
//   gpufeed::hdf5_source src("train.h5");
//   gpufeed::loader<gpufeed::hdf5_source, gpufeed::loader_options<12, 8, 2>> feed(
//       src, {.batch_size = 256, .target = gpufeed::cuda::device(0), .consumer_stream = s});
//   for (auto& b : feed.epoch()) my_kernel<<<g, t, 0, s>>>(b.data().data(), b.size());
//
// Workers read records straight into pinned batch slots (one host copy), each batch crosses
// PCIe in one copy on one of `Streams` streams, and the consumer's stream waits on the batch's
// ready event — no host synchronisation in steady state (the machinery is in detail/loader/).
//
// Typed settings: loader_options<Workers, Prefetch, Streams> fixes values in the loader's type,
// read once into run-time counts (loader_config.hpp); `dynamic` defers a value to loader_config
// (workers, prefetch, streams). Prefetch = batches that may be in flight between the planner and
// the consumer; pinned memory = Prefetch slots, allocated once.
//
// Lifetime: the source must outlive the loader. Batches may outlive the loader (their slots are
// kept until released), but are best released first. Destroying a loader mid-epoch stops its
// threads promptly (at most one chunk of reads per worker) and waits only for copies already
// queued on its streams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <memory>
#include <optional>
#include <ostream>
#include <utility>

#include "gpufeed/batch.hpp"
#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/detail/loader/pipeline.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/loader_config.hpp"
#include "gpufeed/sampler.hpp"
#include "gpufeed/source.hpp"
#include "gpufeed/stats.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed {

template <source Source, loader_options_type Options = default_options>
class loader {
 public:
  // Validates and resolves `config` (config_error names the setting at fault), allocates every
  // slot and starts the threads.
  loader(const Source& src, loader_config config) {
    detail::loading::pipeline_setup setup =
        detail::loading::resolve_config<Options>(src, std::move(config));
    if (!setup.order_notice.empty()) std::fprintf(stderr, "%s\n", setup.order_notice.c_str());
    if (!setup.size_notice.empty()) std::fprintf(stderr, "%s\n", setup.size_notice.c_str());
    sampler_ = std::make_unique<sampler>(setup.order);
    pipeline_ = detail::loading::pipeline<Source>::make(src, std::move(setup));
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

  // Where to resume so that the next batch is the one after the last next() returned: the same
  // on every rank, and valid for a loader at another world size or batch size.
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
  std::shared_ptr<detail::loading::pipeline<Source>> pipeline_;
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
