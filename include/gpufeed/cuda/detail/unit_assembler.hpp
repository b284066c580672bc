// gpufeed::cuda::detail — the device side of decoding on the device (target.hpp: unit_decoder),
// held by device_engine (device_target.hpp), which forwards to it: the device cache of decoded
// units, per target slot a device work area, a device and a pinned status array and events, and
// the decode stream.
//
// A batch's work (detail/device_decode/work_image.hpp) is copied into its slot's work area on
// the engine's copy stream, beside the slot's head; the decode stream waits for that copy, then
// decodes the units into the cache, gathers the runs into the slot, copies the statuses back to
// pinned memory and records the slot's `decoded` event. Batches are assembled in call (sequence)
// order on the one decode stream, so a gather sees every earlier batch's decodes, and a batch's
// decode overwrites cache places only after every earlier gather has read them.
//
// A slot's work area, status arrays and events are reused by its next batch only after the
// consumer released this one (the copy stream waits for `consumed`, recorded after the `ready`
// that follows the gather and the status copy). Nothing is allocated after configure().
// Thread-safe; host-compilable (the kernels come through detail/assembly_kernels.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/detail/assembly_kernels.hpp"
#include "gpufeed/cuda/detail/codec/unit_decode.hpp"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/event.hpp"
#include "gpufeed/cuda/pinned.hpp"
#include "gpufeed/cuda/stream.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed::cuda::detail {

class unit_assembler {
  using work_image = gpufeed::detail::device_decode::work_image;
  using gather_run = gpufeed::detail::device_decode::gather_run;
  using gpu_unit = gpufeed::detail::codec::gpu_unit;

 public:
  // Where a batch's work lies in its work area: each part 256-byte aligned (cudaMalloc's
  // alignment, so the kernels' vector loads of units and runs are aligned).
  struct work_layout {
    std::size_t units = 0, runs = 0, end = 0;
  };
  static constexpr std::size_t align(std::size_t n) noexcept { return (n + 255) / 256 * 256; }
  static work_layout layout(const work_image& w) noexcept {
    work_layout l;
    l.units = align(w.compressed_bytes);
    l.runs = align(l.units + w.unit_count * sizeof(gpu_unit));
    l.end = l.runs + w.run_count * sizeof(gather_run);
    return l;
  }

  [[nodiscard]] static const assembly_kernels* kernels() noexcept {
    return registered_assembly_kernels().load(std::memory_order_acquire);
  }

  // Allocates on the current device. Called once, before any batch (unit_decoder).
  void configure(std::size_t cache_bytes, std::size_t work_bytes, std::size_t slots) {
    if (!kernels())
      throw config_error("device decode: no CUDA translation unit of this program includes "
                         "gpufeed/cuda/device_decode.cuh, which holds its kernels");
    std::lock_guard lock(mutex_);
    cache_ = device_buffer(cache_bytes);
    work_bytes_ = work_bytes;
    max_units_ = work_bytes / sizeof(gpu_unit);
    const std::size_t words = max_units_ + 1;  // the gather's word after the units'
    areas_.clear();
    for (std::size_t d = 0; d < slots; ++d) {
      slot_area a;
      a.work = device_buffer(work_bytes);
      a.status = device_buffer(words * sizeof(std::uint32_t));
      a.host_status = pinned_buffer(words * sizeof(std::uint32_t));
      std::memset(a.host_status.data(), 0, words * sizeof(std::uint32_t));
      areas_.push_back(std::move(a));
    }
    if (!stream_) stream_.emplace();
    counters_.cache_bytes = cache_bytes;
    counters_.work_bytes = work_bytes * slots;
  }
  [[nodiscard]] cudaStream_t decode_stream() const noexcept {
    return stream_ ? stream_->get() : nullptr;
  }

  // Throws config_error, before anything is queued, for a batch that cannot be assembled into a
  // slot of `slot_bytes`: no configure(), a head or data region past the slot, work past
  // work_bytes, a unit reading past the compressed bytes or writing (or staging) past the cache.
  // The units come from the host's planner: checked here, once, so that no plan can make the
  // decode kernel touch memory outside them. Runs are checked by the gather kernel itself.
  void check(const work_image& w, std::size_t head_bytes, std::size_t slot_bytes) const {
    if (areas_.empty()) throw config_error("device decode: assemble() before configure_decode()");
    if (head_bytes > slot_bytes || w.data_offset > slot_bytes)
      throw config_error("device decode: the batch's head (" + std::to_string(head_bytes) +
                         " bytes) or data region (at " + std::to_string(w.data_offset) +
                         ") lies past its slot of " + std::to_string(slot_bytes) + " bytes");
    const work_layout l = layout(w);
    if (w.unit_count > max_units_ || l.end > work_bytes_)
      throw config_error("device decode: a batch's work (" + std::to_string(l.end) +
                         " bytes with alignment) exceeds the work area of " +
                         std::to_string(work_bytes_) + " bytes");
    const std::uint64_t cache = cache_.size();
    for (std::size_t i = 0; i < w.unit_count; ++i) {
      const gpu_unit& u = w.units[i];
      const std::uint64_t stage = gpufeed::detail::codec::gpu_unit_stage_bytes(u);
      if (u.src > w.compressed_bytes || u.src_size > w.compressed_bytes - u.src ||
          u.dst > cache || u.dst_size > cache - u.dst || (stage && (u.stage > cache ||
                                                                    stage > cache - u.stage)))
        throw config_error("device decode: unit " + std::to_string(i) +
                           " lies outside the batch's compressed bytes or the device cache");
    }
  }

  // Queues on `copy` the H2D copies of the work (pinned host memory) into slot d's work area;
  // returns the bytes. After check().
  std::size_t stage(std::size_t d, const work_image& w, cudaStream_t copy) const {
    std::byte* area = areas_[d].work.data();
    const work_layout l = layout(w);
    put(area, w.compressed, w.compressed_bytes, copy);
    put(area + l.units, w.units, w.unit_count * sizeof(gpu_unit), copy);
    put(area + l.runs, w.runs, w.run_count * sizeof(gather_run), copy);
    return w.compressed_bytes + w.unit_count * sizeof(gpu_unit) + w.run_count * sizeof(gather_run);
  }

  // Queues on the decode stream, after the event `copied` (recorded after stage()'s copies):
  // slot d's decode and gather into `slot` (slot_bytes), the status copy and `decoded`.
  void launch(std::size_t d, const work_image& w, std::size_t head_bytes, cudaEvent_t copied,
              std::byte* slot, std::size_t slot_bytes) {
    std::uint32_t scratch = 0;
    std::uint64_t gathered = 0, longest = 0;
    for (std::size_t i = 0; i < w.unit_count; ++i)
      scratch = std::max(scratch, unit_scratch_bytes(w.units[i]));
    scratch = std::min(scratch, gpufeed::detail::codec::gpu_unit_max_bytes);  // larger: refused
    for (std::size_t i = 0; i < w.run_count; ++i) {
      gathered += w.runs[i].len;
      longest = std::max(longest, w.runs[i].len);
    }
    const kernels_t* k = kernels();
    const stream& st = *stream_;
    std::lock_guard lock(mutex_);  // one decode stream, queued in call order
    slot_area& a = areas_[d];
    collect_timing(a, true);
    auto* area = reinterpret_cast<std::uint8_t*>(a.work.data());
    const work_layout l = layout(w);
    auto* status = a.status.as<std::uint32_t>();
    st.wait(copied);
    a.start.record(st);
    k->decode(area, cache_.as<std::uint8_t>(), reinterpret_cast<const gpu_unit*>(area + l.units),
              static_cast<std::uint32_t>(w.unit_count), scratch, status, st);
    GPUFEED_CUDA_TRY(cudaMemsetAsync(status + w.unit_count, 0, sizeof(std::uint32_t), st));
    gather_args g;
    g.cache = cache_.as<std::uint8_t>();
    g.cache_bytes = cache_.size();
    g.dst = reinterpret_cast<std::uint8_t*>(slot) + w.data_offset;
    g.dst_bytes = slot_bytes - w.data_offset;
    g.runs = reinterpret_cast<const gather_run*>(area + l.runs);
    g.run_count = w.run_count;
    shape(g, gathered, longest);
    g.status = status + w.unit_count;
    k->gather(g, st);
    a.end.record(st);
    GPUFEED_CUDA_TRY(cudaMemcpyAsync(a.host_status.data(), status,
                                     (w.unit_count + 1) * sizeof(std::uint32_t),
                                     cudaMemcpyDeviceToHost, st));
    a.decoded.record(st);
    a.timing_pending = true;
    a.units = w.unit_count;
    counters_.batches += 1;
    counters_.units += w.unit_count;
    counters_.launches += w.unit_count > 0 ? 1 : 0;
    counters_.compressed_bytes += w.compressed_bytes;
    counters_.gathered_bytes += gathered;
    counters_.host_bytes += head_bytes;
  }

  // Slot d's statuses: its units', then the gather's word; waits for its decode only if needed.
  [[nodiscard]] std::vector<std::uint32_t> statuses(std::size_t d) {
    const slot_area& a = areas_.at(d);
    if (!a.decoded.ready()) {
      a.decoded.synchronize();
      std::lock_guard lock(mutex_);
      ++host_syncs_;
    }
    const auto* s = reinterpret_cast<const std::uint32_t*>(a.host_status.data());
    return std::vector<std::uint32_t>(s, s + a.units + 1);
  }

  // Copies `host` into `slot` after everything queued on the decode stream, and waits for it.
  void overwrite(std::byte* slot, std::size_t slot_bytes, const std::byte* host,
                 std::size_t bytes) {
    if (bytes > slot_bytes)
      throw config_error("device decode: overwrite of " + std::to_string(bytes) +
                         " bytes into a slot of " + std::to_string(slot_bytes));
    if (!stream_) throw config_error("device decode: overwrite() before configure_decode()");
    std::lock_guard lock(mutex_);
    GPUFEED_CUDA_TRY(cudaMemcpyAsync(slot, host, bytes, cudaMemcpyHostToDevice, *stream_));
    stream_->synchronize();
    ++host_syncs_;
  }

  // Waits for the decode stream (teardown).
  void synchronize() noexcept {
    if (!stream_) return;
    GPUFEED_CUDA_LOG(cudaStreamSynchronize(*stream_));
    std::lock_guard lock(mutex_);
    ++host_syncs_;
  }

  [[nodiscard]] device_decode_counters counters() const {
    std::lock_guard lock(mutex_);
    for (auto& a : areas_) collect_timing(a, false);
    return counters_;
  }
  [[nodiscard]] std::uint64_t host_syncs() const {
    std::lock_guard lock(mutex_);
    return host_syncs_;
  }

 private:
  using kernels_t = assembly_kernels;
  struct slot_area {
    device_buffer work, status;
    pinned_buffer host_status;
    event decoded;
    event start{event::timing::enabled}, end{event::timing::enabled};
    mutable bool timing_pending = false;  // updated from const counters()
    std::size_t units = 0;
  };

  static void put(std::byte* to, const void* from, std::size_t bytes, cudaStream_t s) {
    if (bytes) GPUFEED_CUDA_TRY(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, s));
  }

  // The gather's work items: enough (about 16 Ki) to give every SM's warps a few 16-byte words
  // a lane, by cutting long runs into pieces of at least 1 KiB; groups of 8 lanes for items of
  // 512 bytes or less (4 words a lane); each warp takes as many items as spread them over about
  // 8 Ki warps, from 32 / lanes (one round) to 32.
  static void shape(gather_args& g, std::uint64_t gathered, std::uint64_t longest) noexcept {
    if (g.run_count == 0) return;
    const std::uint64_t by_size = (longest + 1023) / 1024;
    const std::uint64_t by_count = (16384 + g.run_count - 1) / g.run_count;
    g.pieces = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(std::min(by_size, by_count),
                                                                    1, 4096));
    const std::uint64_t items = g.run_count * g.pieces;
    const std::uint64_t item_bytes = gathered / items;
    g.lanes = item_bytes <= 512 ? 8 : 32;
    const std::uint64_t round = 32 / g.lanes;
    const std::uint64_t span = std::clamp<std::uint64_t>(items / 8192, round, 32);
    g.span = static_cast<std::uint32_t>(span / round * round);
  }

  // Adds the decode + gather time of the area's last batch once it has completed (never waits);
  // a batch still running when its area is reused goes unmeasured. Caller holds mutex_.
  void collect_timing(const slot_area& a, bool reusing) const {
    if (!a.timing_pending) return;
    if (!a.end.ready()) {
      if (reusing) a.timing_pending = false;
      return;
    }
    a.timing_pending = false;
    counters_.decode_seconds += event::elapsed_ms(a.start, a.end) * 1e-3;
    counters_.timed_batches += 1;
  }

  device_buffer cache_;
  std::size_t work_bytes_ = 0, max_units_ = 0;
  std::vector<slot_area> areas_;
  std::optional<stream> stream_;
  mutable std::mutex mutex_;
  mutable device_decode_counters counters_;
  std::uint64_t host_syncs_ = 0;
};

}  // namespace gpufeed::cuda::detail
