// A transfer engine whose "device" is host memory and whose unit_decoder decodes with the GPU
// kernels' host emulation (cuda/detail/codec/unit_decode.hpp: the same parse and lane arithmetic
// the warps run), so host tests drive the loader's device decode path end to end: staging, the
// sequence-ordered submission, the device cache's reuse across batches, the gather, the check at
// delivery and the redo on the host. Copies and decodes run synchronously inside copy() and
// assemble(), which the loader calls in sequence order, as one device stream would run them.
// Thread-safe (one lock). A test may make chosen units fail (fail_units) as a device would.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <vector>

#include "gpufeed/cuda/detail/codec/unit_decode.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/memory.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed::test {

class emulated_decode_engine final : public transfer_engine, public unit_decoder {
 public:
  std::pmr::memory_resource* staging_resource() override { return pageable_resource::instance(); }
  bool delivers_in_place() const noexcept override { return false; }
  unit_decoder* decoder() noexcept override { return this; }
  void configure(std::size_t slot_bytes, std::size_t output_bytes, std::size_t slots,
                 std::size_t) override {
    for (std::size_t d = 0; d < slots; ++d) {
      slots_.emplace_back(pageable_resource::instance(), slot_bytes);
      outputs_.emplace_back(pageable_resource::instance(), std::max<std::size_t>(output_bytes, 1));
    }
    slot_bytes_ = slot_bytes;
    statuses_.resize(slots);
  }
  target_slot slot(std::size_t d) const override { return {slots_[d].data(), outputs_[d].data()}; }
  void copy(std::size_t d, std::size_t, std::byte* staging, std::size_t bytes,
            std::size_t token) override {
    std::lock_guard lock(mutex_);
    std::memcpy(slots_[d].data(), staging, bytes);
    statuses_[d].clear();
    done_.push_back(token);
  }
  void complete(std::size_t, std::size_t, const transform_hook& hook,
                const batch_view& view) override {
    if (hook) hook(view, nullptr);
  }
  std::size_t reclaim(std::vector<std::size_t>& done) override {
    std::lock_guard lock(mutex_);
    const std::size_t n = done_.size();
    done.insert(done.end(), done_.begin(), done_.end());
    done_.clear();
    return n;
  }
  void acquire(std::size_t, stream_handle) override {}
  void release(std::size_t, stream_handle) noexcept override {}
  void drain() noexcept override {}

  // unit_decoder
  void configure_decode(std::size_t cache_bytes, std::size_t work_bytes) override {
    cache_.assign(cache_bytes, std::uint8_t{0xA5});  // stale bytes, never zeros
    work_bytes_ = work_bytes;
    counters_.cache_bytes = cache_bytes;
    counters_.work_bytes = work_bytes * slots_.size();
  }
  void assemble(std::size_t d, std::size_t, std::byte* staging, std::size_t head_bytes,
                const detail::device_decode::work_image& w, std::size_t token) override {
    namespace cd = gpufeed::cuda::detail;
    std::lock_guard lock(mutex_);
    if (w.compressed_bytes + w.unit_count * sizeof(detail::codec::gpu_unit) +
            w.run_count * sizeof(detail::device_decode::gather_run) > work_bytes_)
      throw config_error("emulated engine: the work exceeds the work area");
    std::memcpy(slots_[d].data(), staging, head_bytes);
    // The work as the device would receive it: copied, so later writes to staging are not seen.
    const std::vector<std::uint8_t> src(reinterpret_cast<const std::uint8_t*>(w.compressed),
                                        reinterpret_cast<const std::uint8_t*>(w.compressed) +
                                            w.compressed_bytes);
    std::vector<std::uint32_t>& st = statuses_[d];
    st.assign(w.unit_count + 1, 0);
    cd::emulated_unit_warp warp;
    for (std::size_t i = 0; i < w.unit_count; ++i) {
      const detail::codec::gpu_unit& u = w.units[i];
      if (u.src + u.src_size > src.size() || u.dst + u.dst_size > cache_.size() ||
          u.stage + detail::codec::gpu_unit_stage_bytes(u) > cache_.size()) {
        st[i] = static_cast<std::uint32_t>(cd::unit_status::unsupported);
        continue;
      }
      std::vector<std::uint8_t> scratch(std::max<std::uint32_t>(cd::unit_scratch_bytes(u), 1));
      st[i] = static_cast<std::uint32_t>(
          cd::decode_unit(src.data(), cache_.data(), cache_.data(), u, scratch.data(), warp));
      if (fail_ && fail_(decoded_units_ + i)) st[i] = 1;
    }
    decoded_units_ += w.unit_count;
    std::byte* data = slots_[d].data() + w.data_offset;
    const std::size_t room = slot_bytes_ - std::min(w.data_offset, slot_bytes_);
    std::uint64_t gathered = 0;
    for (std::size_t r = 0; r < w.run_count; ++r) {
      const auto& run = w.runs[r];
      if (run.src + run.len > cache_.size() || run.dst + run.len > room) {
        st[w.unit_count] = 1;  // the gather's own word: a run out of bounds is not executed
        continue;
      }
      std::memcpy(data + run.dst, cache_.data() + run.src, run.len);
      gathered += run.len;
    }
    done_.push_back(token);
    counters_.batches += 1;
    counters_.units += w.unit_count;
    counters_.launches += w.unit_count > 0 ? 1 : 0;
    counters_.compressed_bytes += w.compressed_bytes;
    counters_.gathered_bytes += gathered;
    counters_.host_bytes += head_bytes;
  }
  std::vector<std::uint32_t> statuses(std::size_t d) override {
    std::lock_guard lock(mutex_);
    return statuses_[d];
  }
  void overwrite(std::size_t d, const std::byte* host, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    std::memcpy(slots_[d].data(), host, bytes);
    overwrites_ += 1;
  }
  device_decode_counters decode_counters() const override {
    std::lock_guard lock(mutex_);
    return counters_;
  }

  // Units whose running number (over the engine's life) fail(n) says true fail to decode.
  void fail_units(std::function<bool(std::uint64_t)> fail) { fail_ = std::move(fail); }
  [[nodiscard]] std::uint64_t overwrites() const {
    std::lock_guard lock(mutex_);
    return overwrites_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<resource_buffer> slots_, outputs_;
  std::size_t slot_bytes_ = 0, work_bytes_ = 0;
  std::vector<std::uint8_t> cache_;
  std::vector<std::vector<std::uint32_t>> statuses_;
  std::vector<std::size_t> done_;
  std::function<bool(std::uint64_t)> fail_;
  std::uint64_t decoded_units_ = 0, overwrites_ = 0;
  device_decode_counters counters_;
};

}  // namespace gpufeed::test
