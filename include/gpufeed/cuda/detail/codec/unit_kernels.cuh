// gpufeed::cuda::detail — the kernel that decodes a batch of compressed-chunk units
// (detail/codec/gpu_units.hpp), one warp per unit, and its launcher. The decoding itself is
// unit_decode.hpp's, shared with the host tests.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/detail/codec/unit_decode.hpp"
#include "gpufeed/cuda/detail/grid.hpp"

namespace gpufeed::cuda::detail {

// A warp as the group unit_decode.hpp expects.
struct device_warp {
  unsigned lane;
  __device__ void sync() const { __syncwarp(); }
  __device__ void literals(const std::uint8_t* src, std::uint8_t* dst, std::uint32_t n) const {
    lane_copy(src, dst, n, lane, 32);
  }
  __device__ void match(std::uint8_t* dst, std::uint32_t offset, std::uint32_t n) const {
    lane_match(dst, offset, n, lane, 32);
  }
  __device__ void untranspose(const std::uint8_t* rows, std::uint8_t* out, std::uint32_t n,
                              std::uint32_t e) const {
    lane_untranspose(rows, out, n, e, lane, 32);
  }
  __device__ void unshuffle(const std::uint8_t* src, std::uint8_t* out, std::uint32_t n,
                            std::uint32_t e, std::uint32_t limit) const {
    lane_unshuffle(src, out, n, e, limit, lane, 32);
  }
  __device__ std::uint32_t fletcher32(const std::uint8_t* data, std::uint32_t n) const {
    const fletcher_part p = lane_fletcher(data, n, lane, 32);
    std::uint32_t a = p.a, w = p.w;  // each < 65535: 32 of them fit
    for (int d = 16; d > 0; d /= 2) {
      a += __shfl_xor_sync(0xffffffffu, a, d);
      w += __shfl_xor_sync(0xffffffffu, w, d);
    }
    return fletcher_from(a, w, __any_sync(0xffffffffu, p.nonzero) != 0);
  }
  template <class F>
  __device__ void one(F&& f) const {
    if (lane == 0) f();
  }
  __device__ bool first(bool v) const { return __shfl_sync(0xffffffffu, v, 0) != 0; }
  __device__ std::uint32_t adler(const std::uint8_t* data, std::uint32_t n) const {
    const adler_part p = lane_adler(data, n, lane, 32);
    std::uint32_t a = p.a, w = p.w;  // each < 65521: 32 of them fit
    for (int d = 16; d > 0; d /= 2) {
      a += __shfl_xor_sync(0xffffffffu, a, d);
      w += __shfl_xor_sync(0xffffffffu, w, d);
    }
    return adler_from(a, w, n);
  }
};

// Warps of one block stride over the units; each warp has `scratch_bytes` of the block's dynamic
// shared memory for compressed Bitshuffle blocks and Huffman tables. The staged kinds inflate
// into `stage` (device memory) at their own offsets. status[i] receives unit i's unit_status.
// A template (never instantiated but as <0>) so that any number of CUDA translation units may
// include this header: a plain __global__ function defined here would be defined in each.
template <int = 0>
__global__ void decode_units_kernel(const std::uint8_t* src, std::uint8_t* dst,
                                    std::uint8_t* stage,
                                    const gpufeed::detail::codec::gpu_unit* units,
                                    std::uint32_t count, std::uint32_t scratch_bytes,
                                    std::uint32_t* status) {
  extern __shared__ std::uint8_t shared_scratch[];
  const unsigned warps = blockDim.x / 32, warp = threadIdx.x / 32;
  device_warp group{threadIdx.x % 32};
  std::uint8_t* scratch = shared_scratch + static_cast<std::size_t>(warp) * scratch_bytes;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * warps + warp; i < count;
       i += static_cast<std::uint64_t>(gridDim.x) * warps) {
    const gpufeed::detail::codec::gpu_unit u = units[i];
    unit_status s = unit_status::unsupported;
    if (unit_scratch_bytes(u) <= scratch_bytes)
      s = decode_unit(src, dst, stage, u, scratch, group);
    if (group.lane == 0) status[i] = static_cast<std::uint32_t>(s);
  }
}

// Decodes `count` units on `stream`: compressed bytes at `src`, decoded ones to `dst`, the units'
// list and one status word per unit in device memory. `largest_scratch`: the largest
// unit_scratch_bytes of the launch's units (0 when none needs any); at most gpu_unit_max_bytes.
// `stage`: device memory holding every staged unit's [stage, + gpu_unit_stage_bytes) (the
// planner's stage_bytes in all); null when no unit is staged. One launch decodes every kind,
// fletcher32 checks beside the units of the same chunk (they read only the compressed bytes).
inline void launch_decode_units(const std::uint8_t* src, std::uint8_t* dst,
                                const gpufeed::detail::codec::gpu_unit* units,
                                std::uint32_t count, std::uint32_t largest_scratch,
                                std::uint32_t* status, cudaStream_t stream,
                                std::uint8_t* stage = nullptr) {
  if (count == 0) return;
  // Up to 8 warps a block; fewer when each needs much shared memory (64 KiB blocks: 3).
  constexpr std::uint32_t shared_limit = 192 * 1024;
  const std::uint32_t scratch = (largest_scratch + 15) / 16 * 16;
  const std::uint32_t warps =
      scratch == 0 ? 8u : std::clamp<std::uint32_t>(shared_limit / scratch, 1u, 8u);
  const std::uint32_t shared = warps * scratch;
  if (shared > 48 * 1024)
    check(cudaFuncSetAttribute(decode_units_kernel<0>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(shared)),
          "cudaFuncSetAttribute");
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute");
  const std::uint64_t wanted = (count + warps - 1) / warps;
  const unsigned blocks =
      static_cast<unsigned>(std::min<std::uint64_t>(wanted, static_cast<std::uint64_t>(sms) * 16));
  decode_units_kernel<0><<<blocks, warps * 32, shared, stream>>>(src, dst, stage, units, count,
                                                                  scratch, status);
  check_launch("decode_units_kernel");
}

}  // namespace gpufeed::cuda::detail
