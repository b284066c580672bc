// gpufeed::cuda — the device target: batches delivered in GPU memory.
//
//   loader_config c;  c.target = gpufeed::cuda::device(0);
//
// The transfer engine behind it owns, per device slot, the device buffer and four events:
// `ready` (recorded after the copy and the transform hook, waited on by the consumer's stream),
// `consumed` (recorded on the consumer's stream at release, waited on by the copy stream before
// the slot is overwritten) and a timing pair around the copy for telemetry. The host learns that
// a copy finished by querying a per-copy `copied` event (reclaim()), so no thread ever blocks on
// the device in steady state; host_syncs counts the synchronisations gpufeed does make (drain at
// teardown; with device decode, statuses() of a decode not yet done and overwrite(): a batch
// redone on the host). Device decode (unit_decoder) is detail/unit_assembler.hpp's. Not
// cudaLaunchHostFunc: a host function blocks its stream until the CPU has run it, and that round
// trip held every staging slot well past its copy, capping the loader at less than half the
// link's rate (docs/design.md, "Slot reclaim by event query").
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <vector>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device.hpp"
#include "gpufeed/cuda/detail/unit_assembler.hpp"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/device_guard.hpp"
#include "gpufeed/cuda/event.hpp"
#include "gpufeed/cuda/nvtx.hpp"
#include "gpufeed/cuda/pinned.hpp"
#include "gpufeed/cuda/stream.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed::cuda {

class device_engine final : public transfer_engine, public engine_probe, public unit_decoder {
 public:
  explicit device_engine(int device) : device_(device) {
    if (!has_device()) throw cuda_error("no usable CUDA device: " + query().reason);
    props_ = properties(device);  // throws cuda_error for an invalid id
  }
  ~device_engine() override { drain(); }

  [[nodiscard]] std::string describe() const {
    return "cuda:" + std::to_string(device_) + " (" + props_.name + ")";
  }
  std::pmr::memory_resource* staging_resource() override { return pinned_resource::instance(); }
  // Pinned slots on the GPU's NUMA node (pinned_node_resource: mbind, then cudaHostRegister).
  std::unique_ptr<std::pmr::memory_resource> staging_resource_on(int node) override {
    return std::make_unique<pinned_node_resource>(node);
  }
  std::string pci_bus_id() const override { return props_.pci_bus_id; }
  bool delivers_in_place() const noexcept override { return false; }
  engine_probe* probe() noexcept override { return this; }

  void configure(std::size_t slot_bytes, std::size_t output_bytes, std::size_t device_slots,
                 std::size_t streams) override {
    device_guard g(device_);
    slots_.clear();
    for (std::size_t d = 0; d < device_slots; ++d) {
      device_slot s;
      s.buffer = device_buffer(slot_bytes);
      if (output_bytes) s.output = device_buffer(output_bytes);
      slots_.push_back(std::move(s));
    }
    streams_.clear();
    for (std::size_t i = 0; i < streams; ++i) streams_.emplace_back();
    timings_ = std::vector<consumer_timing>(timing_ring);
    device_bytes_ = device_slots * (slot_bytes + output_bytes);
    if (span_capacity_) {
      // Map device event times onto the host clock: one synchronisation, at construction.
      base_.emplace(event::timing::enabled);
      base_->record(streams_[0]);
      base_->synchronize();
      base_host_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
      std::lock_guard lock(mutex_);
      ++counters_.host_syncs;
    }
  }
  void record_copy_spans(std::size_t capacity) override {
    span_capacity_ = capacity;
    spans_.reserve(capacity);
  }
  std::vector<copy_span> copy_spans() override {
    std::lock_guard lock(mutex_);
    for (auto& sl : slots_) collect_timing(sl, false);
    return spans_;
  }
  target_slot slot(std::size_t d) const override {
    return {slots_[d].buffer.data(), slots_[d].output.data()};
  }
  [[nodiscard]] std::size_t device_bytes() const noexcept { return device_bytes_; }

  void copy(std::size_t d, std::size_t s, std::byte* staging, std::size_t bytes,
            std::size_t token) override {
    queue_copy(d, s, staging, bytes, token, nullptr);
  }
  // Device decode (unit_decoder; detail/unit_assembler.hpp does the work): offered once a CUDA
  // translation unit of the program includes gpufeed/cuda/device_decode.cuh.
  unit_decoder* decoder() noexcept override { return decoder_.kernels() ? this : nullptr; }
  void configure_decode(std::size_t cache_bytes, std::size_t work_bytes) override {
    device_guard g(device_);
    decoder_.configure(cache_bytes, work_bytes, slots_.size());
  }
  void assemble(std::size_t d, std::size_t s, std::byte* staging, std::size_t head,
                const gpufeed::detail::device_decode::work_image& w, std::size_t token) override {
    decoder_.check(w, head, slots_.at(d).buffer.size());  // throws before anything is queued
    queue_copy(d, s, staging, head, token, &w);
  }
  std::vector<std::uint32_t> statuses(std::size_t d) override { return decoder_.statuses(d); }
  void overwrite(std::size_t d, const std::byte* host, std::size_t bytes) override {
    device_guard g(device_);
    decoder_.overwrite(slots_.at(d).buffer.data(), slots_[d].buffer.size(), host, bytes);
  }
  device_decode_counters decode_counters() const override { return decoder_.counters(); }
  std::size_t reclaim(std::vector<std::size_t>& done) override {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if (it->copied->ready()) {  // cudaEventQuery: never waits
        done.push_back(it->token);
        it = in_flight_.erase(it);
        ++n;
      } else {
        ++it;
      }
    }
    return n;
  }
  // The hook's kernels and the ready event follow the copy on stream s (after assemble(): the
  // gather, on the decode stream). If either fails, the consumed event is recorded on that
  // stream, so whoever takes slot d next waits for the abandoned work.
  void complete(std::size_t d, std::size_t s, const transform_hook& hook,
                const batch_view& view) override {
    device_guard g(device_);
    const cudaStream_t st = slots_[d].assembled ? decoder_.decode_stream() : streams_[s].get();
    try {
      if (hook) hook(view, st);
      slots_[d].ready.record(st);
    } catch (...) {
      GPUFEED_CUDA_LOG(cudaEventRecord(slots_[d].consumed, st));
      throw;
    }
  }
  void acquire(std::size_t d, stream_handle consumer) override {
    device_guard g(device_);
    device_slot& sl = slots_[d];
    sl.timing = untimed;
    if (!timed_handoff(handoffs_.fetch_add(1, std::memory_order_relaxed))) {
      GPUFEED_CUDA_TRY(cudaStreamWaitEvent(consumer, sl.ready, 0));
      return;
    }
    std::lock_guard lock(mutex_);  // timing records are also read by counters()
    sl.timing = next_timing_++ % timings_.size();
    consumer_timing& t = timings_[sl.timing];
    collect_consumer_timing(t);
    t.pending = false;  // still running after a full ring of batches: goes unmeasured
    t.wait_start.record(consumer);
    GPUFEED_CUDA_TRY(cudaStreamWaitEvent(consumer, sl.ready, 0));
    t.wait_end.record(consumer);
  }
  void release(std::size_t d, stream_handle consumer) noexcept override {
    // The legacy default stream (nullptr) is the current device's: make ours current.
    int previous = device_;
    GPUFEED_CUDA_LOG(cudaGetDevice(&previous));
    if (previous != device_) GPUFEED_CUDA_LOG(cudaSetDevice(device_));
    device_slot& sl = slots_[d];
    GPUFEED_CUDA_LOG(cudaEventRecord(sl.consumed, consumer));
    if (sl.timing != untimed) {
      std::lock_guard lock(mutex_);
      consumer_timing& t = timings_[sl.timing];
      t.pending = cudaEventRecord(t.released, consumer) == cudaSuccess;
      (void)cudaGetLastError();
    }
    if (previous != device_) GPUFEED_CUDA_LOG(cudaSetDevice(previous));
  }
  void drain() noexcept override {
    for (auto& s : streams_) {
      GPUFEED_CUDA_LOG(cudaStreamSynchronize(s));
      std::lock_guard lock(mutex_);
      ++counters_.host_syncs;
    }
    decoder_.synchronize();
  }
  transfer_counters counters() const override {
    std::lock_guard lock(mutex_);
    for (auto& t : timings_) collect_consumer_timing(t);
    transfer_counters c = counters_;
    c.host_syncs += decoder_.host_syncs();  // statuses() and overwrite() waits, its drain
    return c;
  }
  void range_push(const char* name) noexcept override {
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(detail::nvtx_domain(), &a);
  }
  void range_pop() noexcept override { nvtxDomainRangePop(detail::nvtx_domain()); }

 private:
  struct device_slot {
    device_buffer buffer, output;
    event ready, consumed;
    event copy_start{event::timing::enabled}, copy_end{event::timing::enabled};
    bool timing_pending = false;
    std::size_t stream = 0;
    std::size_t bytes = 0;
    std::size_t timing = untimed;  // the consumer_timing record of the batch it holds
    bool assembled = false;        // its batch came through assemble(): ready on the decode stream
  };
  // The consumer stream around one batch: before the wait on `ready`, after it, and at release.
  // A ring indexed by hand-off, not by slot: a slot is refilled while its last batch's consumer
  // work may still run, and its events must survive until they can be read without waiting.
  struct consumer_timing {
    event wait_start{event::timing::enabled}, wait_end{event::timing::enabled};
    event released{event::timing::enabled};
    bool pending = false;
  };
  static constexpr std::size_t timing_ring = 64;
  static constexpr std::size_t untimed = static_cast<std::size_t>(-1);

  // Which hand-offs the consumer's stream times: the first, then about 1 in 8, chosen by a hash
  // of the hand-off number so the choice cannot beat in step with the slot ring (a periodic
  // stall would be over- or under-sampled by every 8th batch). Why sample: the three timing
  // events cost microseconds of consumer-stream time per batch (bench/handoff_overhead measures
  // it), a few percent of a short step; sampled, an eighth of that. The wait and the `consumed`
  // record cost nothing measurable there.
  static bool timed_handoff(std::uint64_t n) noexcept {
    if (n == 0) return true;
    std::uint64_t z = n + 0x9E3779B97F4A7C15ull;  // splitmix64's finaliser
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((z ^ (z >> 31)) & 7u) == 0;
  }

  // copy() and assemble(): after slot d's previous batch is consumed, staging [0, bytes) into the
  // slot on stream s and, with `work`, the work into its area; the copy event reclaim() queries;
  // with `work`, the decode and gather queued behind it. Nothing is in flight if it throws.
  void queue_copy(std::size_t d, std::size_t s, std::byte* staging, std::size_t bytes,
                  std::size_t token, const gpufeed::detail::device_decode::work_image* work) {
    device_guard g(device_);
    device_slot& sl = slots_[d];
    const stream& st = streams_[s];
    st.wait(sl.consumed);  // the consumer is done with this slot's previous batch
    std::lock_guard lock(mutex_);  // timing fields and the in-flight list are shared
    collect_timing(sl, true);
    sl.copy_start.record(st);
    GPUFEED_CUDA_TRY(cudaMemcpyAsync(sl.buffer.data(), staging, bytes, cudaMemcpyHostToDevice, st));
    const std::size_t staged = work ? decoder_.stage(d, *work, st) : 0;
    sl.copy_end.record(st);
    if (work) decoder_.launch(d, *work, bytes, sl.copy_end, sl.buffer.data(), sl.buffer.size());
    sl.timing_pending = true;
    sl.stream = s;
    sl.bytes = bytes + staged;
    sl.assembled = work != nullptr;
    counters_.copies += 1;
    counters_.bytes += sl.bytes;
    in_flight_.push_back(in_flight_copy{&sl.copy_end, token});
  }

  // Adds the consumer stream's wait and work for the slot's last batch once its release event has
  // completed (never waits for it). Caller holds mutex_.
  void collect_consumer_timing(consumer_timing& t) const {
    if (!t.pending || !t.released.ready()) return;
    t.pending = false;
    counters_.consumer_wait_seconds += event::elapsed_ms(t.wait_start, t.wait_end) * 1e-3;
    counters_.consumer_busy_seconds += event::elapsed_ms(t.wait_end, t.released) * 1e-3;
    counters_.timed_batches += 1;
  }

  // Adds the slot's previous copy time, if that copy has finished (never waits for it). A copy
  // still running when its slot is reused (`reusing`) goes unmeasured. Caller holds mutex_.
  void collect_timing(device_slot& sl, bool reusing) {
    if (!sl.timing_pending) return;
    if (!sl.copy_end.ready()) {
      if (reusing) sl.timing_pending = false;
      return;
    }
    sl.timing_pending = false;
    const double ms = event::elapsed_ms(sl.copy_start, sl.copy_end);
    counters_.copy_seconds += ms * 1e-3;
    counters_.timed_copies += 1;
    if (span_capacity_ && spans_.size() < span_capacity_) {
      const auto to_ns = [](float ms_since_base) {
        return static_cast<std::int64_t>(static_cast<double>(ms_since_base) * 1e6);
      };
      copy_span c;
      c.stream = sl.stream;
      c.start_ns = base_host_ns_ + to_ns(event::elapsed_ms(*base_, sl.copy_start));
      c.end_ns = base_host_ns_ + to_ns(event::elapsed_ms(*base_, sl.copy_end));
      c.batch_bytes = sl.bytes;
      spans_.push_back(c);
    }
  }

  int device_;
  device_properties props_;
  std::vector<device_slot> slots_;
  mutable std::vector<consumer_timing> timings_;  // updated from const counters()
  std::size_t next_timing_ = 0;
  std::atomic<std::uint64_t> handoffs_{0};  // acquire() calls
  std::vector<stream> streams_;
  // Copies queued and not yet reclaimed: the slot's copy_end event (a slot is not reused before
  // its batch is released, after its copy was queued) and the staging token.
  struct in_flight_copy {
    const event* copied;
    std::size_t token;
  };
  std::vector<in_flight_copy> in_flight_;
  std::size_t device_bytes_ = 0;
  mutable std::mutex mutex_;
  mutable transfer_counters counters_;
  std::size_t span_capacity_ = 0;
  std::optional<event> base_;  // timing origin of copy spans
  std::int64_t base_host_ns_ = 0;
  std::vector<copy_span> spans_;
  detail::unit_assembler decoder_;  // device decode, once configure_decode() ran
};

// A device target for `id`. Throws gpufeed::cuda_error, with the plain reason from query(), when
// there is no usable device.
inline ::gpufeed::target device(int id = 0) {
  const auto& q = query();
  if (!q.available) throw cuda_error("cannot target cuda:" + std::to_string(id) + ": " + q.reason);
  if (id < 0 || id >= q.device_count)
    throw config_error("cuda:" + std::to_string(id) + " does not exist (" +
                       std::to_string(q.device_count) + " device(s))");
  return ::gpufeed::target([id] { return std::make_unique<device_engine>(id); }, id,
                           "cuda:" + std::to_string(id));
}

// The device target when a device is usable, else the host target; `why` (optional) receives
// the plain reason for falling back.
inline ::gpufeed::target device_or_host(int id = 0, std::string* why = nullptr) {
  const auto& q = query();
  if (q.available && id >= 0 && id < q.device_count) return device(id);
  if (why) *why = q.available ? "cuda:" + std::to_string(id) + " does not exist" : q.reason;
  return ::gpufeed::target::host();
}

}  // namespace gpufeed::cuda
