// gpufeed::cuda::detail — the normalisation kernel behind normalize.cuh.
//
// Memory-bound by design: each thread loads four 4-byte words of input per iteration (16 bytes,
// issued before any store so they are in flight together), each warp load being 128 contiguous
// bytes, and writes each word's four results with one vector store (float4, or 8 bytes for the
// 16-bit types), each warp store contiguous too. Channel bookkeeping costs one or two integer
// divisions per four elements, in 32-bit arithmetic when the batch has fewer than 2^32 elements.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpufeed/cuda/detail/grid.hpp"

namespace gpufeed::cuda::detail {

inline constexpr unsigned normalize_max_channels = 16;
inline constexpr unsigned normalize_unroll = 4;  // input words per thread per iteration

// Passed by value as a kernel argument: the launch captures it, so concurrent normalizers never
// share state and the host object may go away while its kernels are still queued.
struct normalize_params {
  float scale = 1.0f;
  std::uint32_t channels = 0;
  float mean[normalize_max_channels] = {};
  float inv_std[normalize_max_channels] = {};
};

// ((float)x * scale - mean) * inv_std, each step rounded to nearest: the explicit intrinsics keep
// nvcc from contracting into an FMA, so a host reference computed the same way matches exactly.
__device__ __forceinline__ float normalize_one(std::uint32_t x, float scale, float mean,
                                               float inv_std) {
  return __fmul_rn(__fsub_rn(__fmul_rn(__uint2float_rn(x), scale), mean), inv_std);
}

template <class Out>
__device__ __forceinline__ Out to_output(float v) {
  if constexpr (std::is_same_v<Out, float>) {
    return v;
  } else if constexpr (std::is_same_v<Out, __half>) {
    return __float2half_rn(v);
  } else {
    return __float2bfloat16_rn(v);
  }
}

// Stores four results at out[j..j+4); out + j is aligned to 4 * sizeof(Out).
template <class Out>
__device__ __forceinline__ void store4(Out* out, std::uint64_t j, const float (&r)[4]) {
  if constexpr (std::is_same_v<Out, float>) {
    *reinterpret_cast<float4*>(out + j) = make_float4(r[0], r[1], r[2], r[3]);
  } else {
    uint2 u;
    if constexpr (std::is_same_v<Out, __half>) {
      const __half2 lo = __floats2half2_rn(r[0], r[1]);
      const __half2 hi = __floats2half2_rn(r[2], r[3]);
      std::memcpy(&u.x, &lo, 4);
      std::memcpy(&u.y, &hi, 4);
    } else {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(r[0], r[1]);
      const __nv_bfloat162 hi = __floats2bfloat162_rn(r[2], r[3]);
      std::memcpy(&u.x, &lo, 4);
      std::memcpy(&u.y, &hi, 4);
    }
    *reinterpret_cast<uint2*>(out + j) = u;
  }
}

// The channel of element j, stepped element by element. Interleaved (HWC): j % C. Planar (CHW):
// (j / plane) % C, plane = record_elems / C; `rem` is j's position inside its plane.
template <bool Planar, class Index>
struct channel_cursor {
  unsigned c = 0;
  Index rem = 0;
  __device__ __forceinline__ channel_cursor(Index j, Index plane, unsigned channels) {
    if constexpr (Planar) {
      const Index q = j / plane;
      rem = j - q * plane;
      c = static_cast<unsigned>(q % channels);
    } else {
      c = static_cast<unsigned>(j % channels);
    }
  }
  __device__ __forceinline__ void next(Index plane, unsigned channels) {
    if constexpr (Planar) {
      if (++rem != plane) return;
      rem = 0;
    }
    c = (c + 1 == channels) ? 0 : c + 1;
  }
};

// out[j] = normalize(in[j]) for j in [0, n). `vectorised`: in is 4-byte aligned and out is
// 4 * sizeof(Out)-byte aligned, so whole words take the vector path and only the last n % 4
// elements the scalar one; otherwise every element takes the scalar path. Index is uint32_t when
// n < 2^32 (cheaper division), else uint64_t.
template <class Out, bool Planar, class Index>
__global__ void __launch_bounds__(transform_threads)
    normalize_kernel(const std::uint8_t* __restrict__ in, Out* __restrict__ out, std::uint64_t n,
                     std::uint64_t plane64, bool vectorised, normalize_params p) {
  __shared__ float mean[normalize_max_channels];
  __shared__ float inv_std[normalize_max_channels];
  if (threadIdx.x < p.channels) {
    mean[threadIdx.x] = p.mean[threadIdx.x];
    inv_std[threadIdx.x] = p.inv_std[threadIdx.x];
  }
  __syncthreads();
  const unsigned channels = p.channels;
  const float scale = p.scale;
  const Index plane = static_cast<Index>(plane64);

  constexpr std::uint64_t tile = std::uint64_t{transform_threads} * normalize_unroll;
  const std::uint64_t words = vectorised ? n / 4 : 0;
  const auto* in_words = reinterpret_cast<const std::uint32_t*>(in);
  for (std::uint64_t base = blockIdx.x * tile + threadIdx.x; base < words;
       base += std::uint64_t{gridDim.x} * tile) {
    std::uint32_t v[normalize_unroll];
#pragma unroll
    for (unsigned u = 0; u < normalize_unroll; ++u) {
      const std::uint64_t w = base + u * transform_threads;
      v[u] = w < words ? __ldg(in_words + w) : 0u;
    }
#pragma unroll
    for (unsigned u = 0; u < normalize_unroll; ++u) {
      const std::uint64_t w = base + u * transform_threads;
      if (w >= words) break;
      channel_cursor<Planar, Index> cur(static_cast<Index>(4 * w), plane, channels);
      float r[4];
#pragma unroll
      for (unsigned k = 0; k < 4; ++k) {
        r[k] = normalize_one((v[u] >> (8 * k)) & 0xffu, scale, mean[cur.c], inv_std[cur.c]);
        cur.next(plane, channels);
      }
      store4(out, 4 * w, r);
    }
  }

  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t j = 4 * words + blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; j < n;
       j += stride) {
    const channel_cursor<Planar, Index> cur(static_cast<Index>(j), plane, channels);
    out[j] = to_output<Out>(normalize_one(__ldg(in + j), scale, mean[cur.c], inv_std[cur.c]));
  }
}

// Queues the kernel for n elements on `stream`. plane is record_elems / channels (ignored when
// not planar).
template <class Out>
void launch_normalize(const std::uint8_t* in, Out* out, std::uint64_t n, bool planar,
                      std::uint64_t plane, const normalize_params& p, cudaStream_t stream) {
  const bool vectorised = reinterpret_cast<std::uintptr_t>(in) % 4 == 0 &&
                          reinterpret_cast<std::uintptr_t>(out) % (4 * sizeof(Out)) == 0;
  constexpr std::uint64_t tile = std::uint64_t{transform_threads} * normalize_unroll;
  const std::uint64_t wanted = vectorised ? ceil_div(n / 4, tile) + (n % 4 != 0 ? 1 : 0)
                                          : ceil_div(n, transform_threads);
  const dim3 grid(grid_blocks(wanted));
  const dim3 block(transform_threads);
  const bool narrow = n <= 0xffffffffull;
  if (planar) {
    if (narrow)
      normalize_kernel<Out, true, std::uint32_t><<<grid, block, 0, stream>>>(in, out, n, plane,
                                                                             vectorised, p);
    else
      normalize_kernel<Out, true, std::uint64_t><<<grid, block, 0, stream>>>(in, out, n, plane,
                                                                             vectorised, p);
  } else {
    if (narrow)
      normalize_kernel<Out, false, std::uint32_t><<<grid, block, 0, stream>>>(in, out, n, plane,
                                                                              vectorised, p);
    else
      normalize_kernel<Out, false, std::uint64_t><<<grid, block, 0, stream>>>(in, out, n, plane,
                                                                              vectorised, p);
  }
  check_launch("normalize_kernel launch");
}

}  // namespace gpufeed::cuda::detail
