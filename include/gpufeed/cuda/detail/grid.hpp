// gpufeed::cuda::detail — launch geometry shared by the transforms' grid-stride kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "gpufeed/cuda/check.hpp"

namespace gpufeed::cuda::detail {

inline constexpr unsigned transform_threads = 256;  // threads per block of every transform kernel
// Blocks per SM for a grid-stride launch: 8 x 256 threads = 2048, the most an SM of sm_90 holds,
// so one wave fills the GPU and every block then strides through the rest.
inline constexpr unsigned transform_blocks_per_sm = 8;

constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// Blocks for `wanted` blocks' worth of work on the current device: at least 1, at most one full
// wave. cudaGetDevice / cudaDeviceGetAttribute read cached driver state (no synchronisation).
inline unsigned grid_blocks(std::uint64_t wanted) {
  int device = 0;
  int sms = 0;
  GPUFEED_CUDA_TRY(cudaGetDevice(&device));
  GPUFEED_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::uint64_t wave = static_cast<std::uint64_t>(std::max(sms, 1)) * transform_blocks_per_sm;
  return static_cast<unsigned>(std::clamp<std::uint64_t>(wanted, 1, wave));
}

// Reports a failed kernel launch (bad configuration, no device, a sticky earlier fault).
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace gpufeed::cuda::detail
