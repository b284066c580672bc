// gpufeed-bench's GPU side: the synthetic model kernel, copies and the pinned H2D measurement.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>
#include <memory>
#include <string>

#include "bench_gpu.hpp"
#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device.hpp"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/device_decode.cuh"
#include "gpufeed/cuda/device_target.hpp"
#include "gpufeed/cuda/event.hpp"
#include "gpufeed/cuda/pinned.hpp"
#include "gpufeed/cuda/stream.hpp"

namespace bench {
namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Sums the batch's bytes (as 64-bit words when aligned) into *checksum, then keeps each block
// resident until spin_ns have passed since it started. Launched with one block per SM, so all
// blocks start together and the kernel lasts max(spin, read time).
__global__ void model_kernel(const unsigned char* data, std::size_t bytes,
                             unsigned long long spin_ns, unsigned long long* checksum) {
  const unsigned long long t0 = global_ns();
  const std::size_t tid = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long s = 0;
  std::size_t done = 0;
  if (reinterpret_cast<std::uintptr_t>(data) % 8 == 0) {
    const auto* w = reinterpret_cast<const unsigned long long*>(data);
    const std::size_t words = bytes / 8;
    for (std::size_t k = tid; k < words; k += stride) s += w[k];
    done = words * 8;
  }
  for (std::size_t k = done + tid; k < bytes; k += stride) s += data[k];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(checksum, s);
  if (threadIdx.x == 0)
    while (global_ns() - t0 < spin_ns) {
    }
}

class cuda_gpu final : public gpu {
 public:
  explicit cuda_gpu(int id) : id_(id) {
    GPUFEED_CUDA_TRY(cudaSetDevice(id));
    props_ = gpufeed::cuda::properties(id);
    stream_ = gpufeed::cuda::stream();
    checksum_ = gpufeed::cuda::device_buffer(sizeof(unsigned long long));
    GPUFEED_CUDA_TRY(cudaMemset(checksum_.data(), 0, checksum_.size()));
  }

  std::string describe() const override {
    const auto& q = gpufeed::cuda::query();
    return props_.name + ", cuda:" + std::to_string(id_) + ", " +
           std::to_string(props_.multiprocessors) + " SMs, " +
           std::to_string(props_.async_engines) + " copy engines, " +
           std::to_string(props_.total_memory >> 30) + " GiB, driver CUDA " +
           gpufeed::cuda::version_string(q.driver_version) + ", runtime " +
           gpufeed::cuda::version_string(q.runtime_version);
  }
  gpufeed::target target() const override { return gpufeed::cuda::device(id_); }
  gpufeed::stream_handle stream() const override { return stream_.get(); }
  std::pmr::memory_resource* pinned() const override {
    return gpufeed::cuda::pinned_resource::instance();
  }

  void model(const std::byte* data, std::size_t bytes, double compute_ms,
             gpufeed::stream_handle s) override {
    const auto spin = static_cast<unsigned long long>(std::max(0.0, compute_ms) * 1e6);
    const unsigned blocks = static_cast<unsigned>(std::max(1, props_.multiprocessors));
    const bool timed = traced_ < timing_.size();
    if (timed) timing_[traced_].first.record(s);
    model_kernel<<<blocks, 256, 0, s>>>(reinterpret_cast<const unsigned char*>(data), bytes, spin,
                                        checksum_.as<unsigned long long>());
    GPUFEED_CUDA_TRY(cudaGetLastError());
    if (timed) timing_[traced_++].second.record(s);
  }

  void trace_models(std::size_t capacity) override {
    using gpufeed::cuda::event;
    timing_.clear();
    traced_ = 0;
    if (capacity == 0) return;
    for (std::size_t k = 0; k < capacity; ++k)
      timing_.emplace_back(event(event::timing::enabled), event(event::timing::enabled));
    // Origin: an event the host waits for, so its device time maps onto the host clock.
    base_.emplace(event::timing::enabled);
    base_->record(stream_);
    base_->synchronize();
    base_host_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  std::vector<std::pair<std::int64_t, std::int64_t>> model_spans() override {
    using gpufeed::cuda::event;
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    if (traced_ == 0) return out;
    timing_[traced_ - 1].second.synchronize();
    auto at = [&](const event& e) {
      return base_host_ns_ +
             static_cast<std::int64_t>(static_cast<double>(event::elapsed_ms(*base_, e)) * 1e6);
    };
    for (std::size_t k = 0; k < traced_; ++k)
      out.emplace_back(at(timing_[k].first), at(timing_[k].second));
    return out;
  }
  void synchronize(gpufeed::stream_handle s) override {
    GPUFEED_CUDA_TRY(cudaStreamSynchronize(s));
  }

  std::byte* scratch(std::size_t bytes) override {
    if (scratch_.size() < bytes) scratch_ = gpufeed::cuda::device_buffer(bytes);
    return scratch_.data();
  }
  void copy_pageable(std::byte* device_dst, const std::byte* host_src,
                     std::size_t bytes) override {
    GPUFEED_CUDA_TRY(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
  }
  void copy_to_host(std::byte* host_dst, const std::byte* device_src, std::size_t bytes) override {
    GPUFEED_CUDA_TRY(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost));
  }

  double pinned_h2d_gbps(std::size_t bytes, int reps) override {
    gpufeed::cuda::pinned_buffer host(bytes);
    gpufeed::cuda::device_buffer dev(bytes);
    std::fill_n(host.data(), bytes, std::byte{1});  // fault the pages in before timing
    gpufeed::cuda::event start(gpufeed::cuda::event::timing::enabled);
    gpufeed::cuda::event stop(gpufeed::cuda::event::timing::enabled);
    for (int k = 0; k < 2; ++k)
      GPUFEED_CUDA_TRY(cudaMemcpyAsync(dev.data(), host.data(), bytes, cudaMemcpyHostToDevice,
                                       stream_.get()));
    start.record(stream_);
    for (int k = 0; k < reps; ++k)
      GPUFEED_CUDA_TRY(cudaMemcpyAsync(dev.data(), host.data(), bytes, cudaMemcpyHostToDevice,
                                       stream_.get()));
    stop.record(stream_);
    stop.synchronize();
    const double ms = gpufeed::cuda::event::elapsed_ms(start, stop);
    return ms > 0 ? static_cast<double>(bytes) * reps / (ms * 1e-3) / 1e9 : 0.0;
  }

 private:
  int id_;
  gpufeed::cuda::device_properties props_;
  gpufeed::cuda::stream stream_{};
  gpufeed::cuda::device_buffer checksum_, scratch_;
  std::vector<std::pair<gpufeed::cuda::event, gpufeed::cuda::event>> timing_;
  std::size_t traced_ = 0;
  std::optional<gpufeed::cuda::event> base_;
  std::int64_t base_host_ns_ = 0;
};

}  // namespace

std::unique_ptr<gpu> open_gpu(int id, std::string& why) {
  const auto& q = gpufeed::cuda::query();
  if (!q.available) {
    why = q.reason;
    return nullptr;
  }
  if (id < 0 || id >= q.device_count) {
    why = "cuda:" + std::to_string(id) + " does not exist (" + std::to_string(q.device_count) +
          " device(s))";
    return nullptr;
  }
  return std::make_unique<cuda_gpu>(id);
}

}  // namespace bench
