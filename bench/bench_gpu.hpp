// gpufeed-bench: what the benchmark needs from a GPU, behind a host-only interface.
//
// The benchmark's C++ files never include CUDA headers: bench_gpu.cu (built by nvcc when the
// build has GPUFEED_HAS_NVCC) implements this interface with the synthetic model kernel, and
// bench_gpu_none.cpp stands in otherwise, so the same program runs host-only anywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/target.hpp"

namespace bench {

class gpu {
 public:
  virtual ~gpu() = default;

  // "NVIDIA H200, cuda:0, 132 SMs, 3 copy engines, driver 13.0".
  [[nodiscard]] virtual std::string describe() const = 0;
  // gpufeed::cuda::device(id) for loader_config::target.
  [[nodiscard]] virtual gpufeed::target target() const = 0;
  // The consumer's stream (non-blocking), created with the gpu.
  [[nodiscard]] virtual gpufeed::stream_handle stream() const = 0;
  // cuda::pinned_resource, for loader_config::staging_memory and pinned read buffers.
  [[nodiscard]] virtual std::pmr::memory_resource* pinned() const = 0;

  // The synthetic model: one kernel on `s` (nullptr = the legacy default stream) that sums the
  // `bytes` of device memory at `data` into a device-resident checksum (a real data
  // dependency), then spins until `compute_ms` have passed since it started. One resident block
  // per SM, so the kernel lasts max(compute_ms, time to read the bytes) plus launch latency.
  virtual void model(const std::byte* data, std::size_t bytes, double compute_ms,
                     gpufeed::stream_handle s) = 0;
  virtual void synchronize(gpufeed::stream_handle s) = 0;
  // Times the next `capacity` model kernels (CUDA events around each; 0 = stop and forget).
  virtual void trace_models(std::size_t capacity) = 0;
  // Their [start, end) on the host's steady_clock, in nanoseconds (synchronises the device).
  virtual std::vector<std::pair<std::int64_t, std::int64_t>> model_spans() = 0;

  // A device buffer of at least `bytes` owned by the gpu (the naive loader's batch).
  virtual std::byte* scratch(std::size_t bytes) = 0;
  // The naive loader's copy: synchronous cudaMemcpy from pageable memory.
  virtual void copy_pageable(std::byte* device_dst, const std::byte* host_src,
                             std::size_t bytes) = 0;
  // Synchronous device-to-host copy (verification only).
  virtual void copy_to_host(std::byte* host_dst, const std::byte* device_src,
                            std::size_t bytes) = 0;

  // GB/s of `reps` back-to-back cudaMemcpyAsync of `bytes` from pinned memory (CUDA events).
  virtual double pinned_h2d_gbps(std::size_t bytes, int reps) = 0;
};

// The GPU when this build has the kernels (nvcc) and device `id` is usable; otherwise nullptr,
// and `why` says, in plain words, why not.
std::unique_ptr<gpu> open_gpu(int id, std::string& why);

}  // namespace bench
