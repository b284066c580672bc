// gpufeed — where a loader delivers batches: host memory, or a CUDA device.
//
// Every target is a transfer_engine: the loader has one code path and asks the engine to move
// each filled staging slot into one of its target slots. host_engine (below) delivers in place
// (the target slot is the staging slot itself, no copy); cuda::device_engine
// (include/gpufeed/cuda/device_target.hpp) makes one H2D copy per batch. The loader is host code
// and never includes CUDA headers; it sees engines only through these interfaces, called a few
// times per batch, so the indirection costs nothing measurable.
//
// An engine may also offer an engine_probe: copy times, copy spans for the timeline, and
// profiler ranges (NVTX). The loader's hot path never depends on one being there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/batch_view.hpp"
#include "gpufeed/detail/device_decode/work_image.hpp"
#include "gpufeed/detail/numa/node_resource.hpp"
#include "gpufeed/memory.hpp"

namespace gpufeed {

// Counters a probing engine keeps (read by telemetry).
struct transfer_counters {
  std::uint64_t copies = 0;
  std::uint64_t bytes = 0;
  double copy_seconds = 0;          // sum of measured H2D copy times (CUDA events)
  std::uint64_t timed_copies = 0;   // copies whose time was measured
  std::uint64_t host_syncs = 0;     // host-blocking synchronisations gpufeed made (teardown only)
  // The consumer's stream, measured on the device with events around a sample of hand-offs (the
  // first, then about 1 in 8, pseudo-randomly; timing every one costs the stream microseconds per
  // batch, bench/handoff_overhead): time it sat waiting for a batch's ready event, and time from then to the
  // batch's release (its work). Sums over the timed_batches sampled; use them as a ratio.
  double consumer_wait_seconds = 0;
  double consumer_busy_seconds = 0;
  std::uint64_t timed_batches = 0;
};

// One H2D copy on the timeline: steady_clock nanoseconds (the device's event times mapped onto
// the host clock at the engine's start).
struct copy_span {
  std::size_t stream = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  std::uint64_t batch_bytes = 0;
};

// Optional measurements of an engine. Thread-safe.
class engine_probe {
 public:
  virtual ~engine_probe() = default;
  [[nodiscard]] virtual transfer_counters counters() const = 0;
  // Keep the timeline of up to `capacity` copies (0 = off). Called before configure(); when on,
  // a device engine's configure() synchronises once with the device to map event times onto the
  // host clock.
  virtual void record_copy_spans(std::size_t capacity) = 0;
  // The copies recorded so far whose events have completed (never waits for the device).
  [[nodiscard]] virtual std::vector<copy_span> copy_spans() = 0;
  // Names a range of work on the calling thread in a profiler's timeline (NVTX on CUDA).
  virtual void range_push(const char* name) noexcept = 0;
  virtual void range_pop() noexcept = 0;
};

// What an engine that decodes on its device counts (loader_stats::device_decode).
struct device_decode_counters {
  std::uint64_t batches = 0;           // batches whose records were gathered on the device
  std::uint64_t units = 0;             // units decoded (LZ4 blocks, zlib streams, ...)
  std::uint64_t launches = 0;          // batches whose work decoded units (one launch each)
  std::uint64_t compressed_bytes = 0;  // compressed bytes copied to the device
  std::uint64_t gathered_bytes = 0;    // record bytes gathered from the device cache
  std::uint64_t host_bytes = 0;        // record bytes read on the host and copied as they are
  double decode_seconds = 0;           // device time of decode + gather (CUDA events; sampled)
  std::uint64_t timed_batches = 0;     // batches whose decode_seconds were measured
  std::uint64_t cache_bytes = 0;       // device memory of the cache of decoded units
  std::uint64_t work_bytes = 0;        // device memory of the batches' work areas
};

// Decoding on the device (docs/design.md, "GPU decode in the loader"): an engine that offers it
// (transfer_engine::unit_decoder) keeps a device cache of decoded units and, per target slot, a
// work area. Thread-safe as the engine. Batches that use it are submitted in sequence order.
class unit_decoder {
 public:
  virtual ~unit_decoder() = default;
  // The device cache (`cache_bytes`) and each target slot's work area (`work_bytes`: the
  // compressed bytes, units and runs of one batch). Once, after configure(), before any assemble.
  virtual void configure_decode(std::size_t cache_bytes, std::size_t work_bytes) = 0;
  // In place of copy() for a batch with device work, called in batch sequence order: on stream
  // `stream`, once target slot d's previous batch is consumed, copies staging [0, head_bytes)
  // (metadata, and records read on the host when there are any) into slot d and the work into
  // its work area; then, on the engine's decode stream (one stream, so in call order), decodes
  // the units into the cache and gathers the runs into slot d's data, and writes each unit's
  // status where statuses(d) reads it. `token` comes back through reclaim() as with copy().
  // complete(d, ...) then runs the hook and marks the batch ready after the gather.
  virtual void assemble(std::size_t d, std::size_t stream, std::byte* staging,
                        std::size_t head_bytes, const detail::device_decode::work_image& work,
                        std::size_t token) = 0;
  // Slot d's unit statuses, one per unit of its last assemble() (0: decoded), then the gather's
  // (device_decode::gather_out_of_range when a run was refused); waits for that
  // decode to finish if it has not (the consumer asks when the batch is delivered: in steady
  // state it finished long before).
  [[nodiscard]] virtual std::vector<std::uint32_t> statuses(std::size_t d) = 0;
  // Replaces slot d's [0, bytes) with `host` and waits until it is there: a batch redone on the
  // host after its decode failed. The slot's batch is then ready as it was.
  virtual void overwrite(std::size_t d, const std::byte* host, std::size_t bytes) = 0;
  [[nodiscard]] virtual device_decode_counters decode_counters() const = 0;
};

// A target slot: where one delivered batch lies (target memory).
struct target_slot {
  std::byte* data = nullptr;    // the batch's slot image: metadata, then records
  std::byte* output = nullptr;  // its transform output buffer (null without one)
};

// Moves filled staging slots into target slots. Thread-safe. Lifecycle: configure() once, then
// any number of copy / complete / reclaim / acquire / release, then drain() before destruction.
class transfer_engine {
 public:
  virtual ~transfer_engine() = default;

  // Where staging slots come from (device targets: pinned, so copies are fast and asynchronous).
  [[nodiscard]] virtual std::pmr::memory_resource* staging_resource() = 0;
  // Staging memory on NUMA node `node` (the caller owns the resource and frees every slot
  // before it), or nullptr when this engine cannot place it.
  [[nodiscard]] virtual std::unique_ptr<std::pmr::memory_resource> staging_resource_on(int) {
    return nullptr;
  }
  // The device's PCI bus id, for its NUMA node; "" when there is no device.
  [[nodiscard]] virtual std::string pci_bus_id() const { return {}; }
  // True when a staging slot comes back only once its batch is released (the batch lies in it),
  // false when it comes back as soon as its copy has run. The loader sizes its staging pool by it
  // and, when true, waits for a release instead of polling reclaim().
  [[nodiscard]] virtual bool delivers_in_place() const noexcept = 0;
  // Target slots of slot_bytes (+ output_bytes each for transforms) and `streams` streams.
  // Called once, before any copy.
  virtual void configure(std::size_t slot_bytes, std::size_t output_bytes, std::size_t slots,
                         std::size_t streams) = 0;
  // Target slot d. Valid for the slot's current batch after copy().
  [[nodiscard]] virtual target_slot slot(std::size_t d) const = 0;

  // Queues, on stream `stream`: wait until target slot d's previous batch is consumed, then move
  // `bytes` from staging into it. `token` names the staging slot: reclaim() hands it back once
  // it may be refilled. Never blocks the calling thread on the device. If it throws, nothing was
  // queued and the token will never be reclaimed.
  virtual void copy(std::size_t d, std::size_t stream, std::byte* staging, std::size_t bytes,
                    std::size_t token) = 0;
  // After copy(): runs hook(view, s) (if any) so that its work follows the copy, then marks
  // slot d ready. If it throws, slot d's queued work is abandoned safely (whoever takes d next
  // waits for it) and the token still comes back through reclaim().
  virtual void complete(std::size_t d, std::size_t stream, const transform_hook& hook,
                        const batch_view& view) = 0;
  // Appends to `done` the tokens of staging slots free again since the last call, and returns
  // how many. Never blocks (an event query per copy in flight on a device).
  virtual std::size_t reclaim(std::vector<std::size_t>& done) = 0;
  // The consumer's stream waits for slot d's batch (no host synchronisation).
  virtual void acquire(std::size_t d, stream_handle consumer) = 0;
  // Slot d's batch is released once `consumer` has passed this point: it is refilled only after.
  virtual void release(std::size_t d, stream_handle consumer) noexcept = 0;
  // Waits for everything queued (teardown only; counted in host_syncs).
  virtual void drain() noexcept = 0;
  // The engine's measurements, or nullptr when it has none.
  [[nodiscard]] virtual engine_probe* probe() noexcept { return nullptr; }
  // Its device decoder, or nullptr when it decodes nothing (the host target).
  [[nodiscard]] virtual unit_decoder* decoder() noexcept { return nullptr; }
};

// The host target's engine: batches are delivered in the staging slot the workers filled (one
// host copy, by the workers' reads), and a staging slot comes back when its batch is released.
// The hook runs on the calling (worker) thread with stream == nullptr.
class host_engine final : public transfer_engine {
 public:
  std::pmr::memory_resource* staging_resource() override { return pageable_resource::instance(); }
  std::unique_ptr<std::pmr::memory_resource> staging_resource_on(int node) override {
    return std::make_unique<detail::numa::node_resource>(node);
  }
  bool delivers_in_place() const noexcept override { return true; }
  void configure(std::size_t, std::size_t output_bytes, std::size_t slots, std::size_t) override {
    slots_.assign(slots, in_place{});
    released_.reserve(slots);  // a token is released at most once per slot: release() never grows it
    outputs_.clear();
    if (output_bytes)
      for (std::size_t d = 0; d < slots; ++d)
        outputs_.emplace_back(pageable_resource::instance(), output_bytes);
  }
  target_slot slot(std::size_t d) const override {
    return {slots_[d].staging, outputs_.empty() ? nullptr : outputs_[d].data()};
  }
  void copy(std::size_t d, std::size_t, std::byte* staging, std::size_t, std::size_t token)
      override {
    slots_[d] = in_place{staging, token};  // slot d is owned by the caller until release
  }
  void complete(std::size_t d, std::size_t, const transform_hook& hook,
                const batch_view& view) override {
    try {
      if (hook) hook(view, nullptr);
    } catch (...) {
      release(d, nullptr);  // the batch failed: its staging slot is free again
      throw;
    }
  }
  std::size_t reclaim(std::vector<std::size_t>& done) override {
    std::lock_guard lock(mutex_);
    const std::size_t n = released_.size();
    done.insert(done.end(), released_.begin(), released_.end());
    released_.clear();
    return n;
  }
  void acquire(std::size_t, stream_handle) override {}
  void release(std::size_t d, stream_handle) noexcept override {
    std::lock_guard lock(mutex_);
    released_.push_back(slots_[d].token);
  }
  void drain() noexcept override {}

 private:
  struct in_place {
    std::byte* staging = nullptr;
    std::size_t token = 0;
  };
  std::vector<in_place> slots_;
  std::vector<resource_buffer> outputs_;
  std::mutex mutex_;
  std::vector<std::size_t> released_;
};

class target {
 public:
  using engine_factory = std::function<std::unique_ptr<transfer_engine>()>;

  // Batches in host memory (pageable), no GPU involved.
  static target host() { return target(); }

  // A device target; normally made by gpufeed::cuda::device(id).
  target(engine_factory factory, int device, std::string name)
      : factory_(std::move(factory)), device_(device), name_(std::move(name)) {}

  [[nodiscard]] bool is_host() const noexcept { return !factory_; }
  [[nodiscard]] int device() const noexcept { return device_; }  // -1 for host
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::unique_ptr<transfer_engine> make_engine() const {
    if (!factory_) return std::make_unique<host_engine>();
    return factory_();
  }

 private:
  target() = default;
  engine_factory factory_;
  int device_ = -1;
  std::string name_ = "host";
};

}  // namespace gpufeed
