// gpufeed — where a loader delivers batches: host memory, or a CUDA device.
//
// The loader is host code and never includes CUDA headers. A device target is a transfer_engine
// made by include/gpufeed/cuda/device_target.hpp (gpufeed::cuda::device(id)); the loader sees it
// only through this interface, called once per batch, so the indirection costs nothing
// measurable. Streams cross the boundary as stream_handle: cudaStream_t is `CUstream_st*`, and
// declaring the struct here lets host code pass a user's stream through without the CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <memory_resource>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/memory.hpp"

struct CUstream_st;

namespace gpufeed {

// A cudaStream_t without the CUDA headers. nullptr is CUDA's legacy default stream.
using stream_handle = CUstream_st*;

// What a transform hook sees of a batch: pointers in the target's memory (device memory on a
// device target), valid for the duration of the call. Work the hook queues on the stream it is
// given is ordered after the batch's copy and before the consumer may touch the batch.
struct batch_view {
  std::byte* data = nullptr;             // packed records
  std::size_t data_bytes = 0;
  const std::uint64_t* offsets = nullptr;  // records + 1 byte offsets into data
  const std::int64_t* labels = nullptr;    // null when the source has none
  const std::uint64_t* indices = nullptr;  // global record indices
  std::size_t records = 0;
  std::size_t record_bytes = 0;          // fixed record size, 0 when records vary
  std::byte* output = nullptr;           // the batch's transform output buffer (may be null)
  std::size_t output_bytes = 0;
  bool on_device = false;
};

// Runs on the pipeline after a batch is in the target's memory: on a device target, on the copy
// stream (queue kernels there, never synchronise); on the host target, on the worker thread
// that completed the batch, with stream == nullptr. An exception fails that batch.
using transform_hook = std::function<void(const batch_view&, stream_handle)>;

// Counters a transfer engine keeps (read by telemetry).
struct transfer_counters {
  std::uint64_t copies = 0;
  std::uint64_t bytes = 0;
  double copy_seconds = 0;          // sum of measured H2D copy times (CUDA events)
  std::uint64_t timed_copies = 0;   // copies whose time was measured
  std::uint64_t host_syncs = 0;     // host-blocking synchronisations gpufeed made (teardown only)
  // The consumer's stream, measured on the device with events around a sample of hand-offs (the
  // first, then about 1 in 8, pseudo-randomly; timing every one costs the stream ~4.6 us per
  // batch on the H200): time it sat waiting for a batch's ready event, and time from then to the
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

// Moves filled host slots to a device. Thread-safe. Lifecycle: configure() once, then any number
// of submit_copy / run_hook / mark_ready / consumer_acquire / consumer_release, then drain()
// before destruction.
class transfer_engine {
 public:
  virtual ~transfer_engine() = default;

  [[nodiscard]] virtual std::string describe() const = 0;
  // Where staging slots come from: pinned memory, so copies are fast and truly asynchronous.
  [[nodiscard]] virtual std::pmr::memory_resource* staging_resource() = 0;
  // Allocates `device_slots` device buffers of slot_bytes (+ output_bytes each for transforms)
  // and `streams` streams. Called once, before any submit.
  virtual void configure(std::size_t slot_bytes, std::size_t output_bytes,
                         std::size_t device_slots, std::size_t streams) = 0;
  [[nodiscard]] virtual std::byte* device_slot(std::size_t d) const = 0;
  [[nodiscard]] virtual std::byte* output_slot(std::size_t d) const = 0;
  [[nodiscard]] virtual std::size_t device_bytes() const = 0;

  // Queues, on stream `stream`: wait for device slot d's consumed event, then copy `bytes` from
  // staging into slot d. `token` names the staging buffer: reclaim() hands it back once the copy
  // has finished. Never blocks the calling thread on the device. If it throws, nothing was queued
  // and the token will never be reclaimed.
  virtual void submit_copy(std::size_t d, std::size_t stream, const std::byte* staging,
                           std::size_t bytes, std::size_t token) = 0;
  // Appends to `done` the tokens of copies that have finished since the last call, and returns
  // how many. Never blocks (an event query per copy in flight).
  virtual std::size_t reclaim(std::vector<std::size_t>& done) = 0;
  // Calls hook(view, s) with the engine's stream s, so the hook's kernels follow the copy.
  virtual void run_hook(std::size_t stream, const transform_hook& hook, const batch_view& view) = 0;
  // Records slot d's ready event on the stream: the batch is complete on the device after it.
  virtual void mark_ready(std::size_t d, std::size_t stream) = 0;
  // Slot d's queued work is abandoned (its batch failed after the copy was queued): whoever takes
  // d next must wait for that work, so the consumed event is recorded on the engine's stream.
  virtual void abandon(std::size_t d, std::size_t stream) noexcept = 0;
  // The consumer's stream waits for slot d's ready event (no host synchronisation).
  virtual void consumer_acquire(std::size_t d, stream_handle consumer) = 0;
  // Records slot d's consumed event on the consumer's stream: the slot is refilled only after it.
  virtual void consumer_release(std::size_t d, stream_handle consumer) noexcept = 0;
  // Waits for everything queued (teardown only; counted in host_syncs).
  virtual void drain() noexcept = 0;
  [[nodiscard]] virtual transfer_counters counters() const = 0;
  // Keep the timeline of up to `capacity` copies (0 = off). Called before configure(); when on,
  // configure() synchronises once with the device to map event times onto the host clock.
  virtual void record_copy_spans(std::size_t capacity) = 0;
  // The copies recorded so far whose events have completed (never waits for the device).
  [[nodiscard]] virtual std::vector<copy_span> copy_spans() = 0;
  // Names a range of work on the calling thread in a profiler's timeline (NVTX on CUDA).
  virtual void range_push(const char* name) noexcept = 0;
  virtual void range_pop() noexcept = 0;
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
    return factory_ ? factory_() : nullptr;
  }

 private:
  target() = default;
  engine_factory factory_;
  int device_ = -1;
  std::string name_ = "host";
};

}  // namespace gpufeed
