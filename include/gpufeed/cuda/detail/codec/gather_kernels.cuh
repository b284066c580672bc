// gpufeed::cuda::detail — the gather kernel of the device decode path: copies a batch's runs
// (detail/device_decode/work_image.hpp: gather_run) from the device cache of decoded units into
// the batch's slot, and its launcher.
//
// Runs come many and small (rows of a few hundred bytes: tens of thousands a batch) or few and
// large (whole chunks, 64 KiB to MiBs). Each warp reads the headers of 32 consecutive work items
// side by side (one per lane), then copies them in groups of `lanes` lanes, 32 / lanes items at a
// time; a large run is cut into `pieces` items, so few runs still spread over every SM. Copies
// use the widest word (16, 8 or 4 bytes) to which source and destination can be aligned
// together, with a few loads in flight per lane before the stores, or 4-byte words shifted
// together from the source's when their alignments differ below 4. A run outside the cache or
// the slot is checked before anything is read and never copied: a status word, never a fault.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/detail/assembly_kernels.hpp"
#include "gpufeed/cuda/detail/grid.hpp"

namespace gpufeed::cuda::detail {

// Copies `words` words of T from src to dst (both T-aligned) by lane `lane` of `lanes`; four
// loads of each lane in flight before its stores.
template <class T>
__device__ __forceinline__ void lanes_copy_words(const T* __restrict__ src, T* __restrict__ dst,
                                                 std::uint64_t words, unsigned lane,
                                                 unsigned lanes) {
  constexpr unsigned unroll = 4;
  std::uint64_t i = lane;
  for (; i + std::uint64_t{lanes} * (unroll - 1) < words; i += std::uint64_t{lanes} * unroll) {
    T v[unroll];
#pragma unroll
    for (unsigned k = 0; k < unroll; ++k) v[k] = src[i + std::uint64_t{lanes} * k];
#pragma unroll
    for (unsigned k = 0; k < unroll; ++k) dst[i + std::uint64_t{lanes} * k] = v[k];
  }
  for (; i < words; i += lanes) dst[i] = src[i];
}

// Copies n bytes whose source and destination differ in alignment below 4 bytes: bytes until
// dst is 4-byte aligned, then each 4-byte word of dst put together from the two aligned source
// words it straddles (a funnel shift), then the last bytes. The second word of the last shift
// holds a byte of the source, so no read leaves the aligned words the source lies in.
__device__ inline void lanes_copy_shifted(const std::uint8_t* src, std::uint8_t* dst,
                                          std::uint64_t n, unsigned lane, unsigned lanes) {
  std::uint64_t head = (4 - (reinterpret_cast<std::uintptr_t>(dst) & 3)) & 3;
  if (head > n) head = n;
  for (std::uint64_t i = lane; i < head; i += lanes) dst[i] = src[i];
  src += head;
  dst += head;
  n -= head;
  const unsigned skew = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(src) & 3);
  const auto* from = reinterpret_cast<const std::uint32_t*>(src - skew);
  auto* to = reinterpret_cast<std::uint32_t*>(dst);
  const std::uint64_t words = n / 4;
  for (std::uint64_t i = lane; i < words; i += lanes)
    to[i] = __funnelshift_r(from[i], from[i + 1], 8 * skew);
  for (std::uint64_t i = words * 4 + lane; i < n; i += lanes) dst[i] = src[i];
}

// Copies n bytes by lane `lane` of `lanes` at any alignment: bytes until dst reaches the widest
// word (4 to 16 bytes) that src can share, those words, then the remaining bytes; below 4,
// lanes_copy_shifted.
__device__ inline void lanes_copy(const std::uint8_t* src, std::uint8_t* dst, std::uint64_t n,
                                  unsigned lane, unsigned lanes) {
  const auto s = reinterpret_cast<std::uintptr_t>(src), d = reinterpret_cast<std::uintptr_t>(dst);
  std::uint64_t w = 16;
  while (w > 4 && ((s ^ d) & (w - 1)) != 0) w /= 2;
  if (((s ^ d) & (w - 1)) != 0) {
    lanes_copy_shifted(src, dst, n, lane, lanes);
    return;
  }
  std::uint64_t head = (w - (d & (w - 1))) & (w - 1);
  if (head > n) head = n;
  for (std::uint64_t i = lane; i < head; i += lanes) dst[i] = src[i];
  src += head;
  dst += head;
  n -= head;
  const std::uint64_t words = n / w, body = words * w;
  switch (w) {
    case 16:
      lanes_copy_words(reinterpret_cast<const uint4*>(src), reinterpret_cast<uint4*>(dst), words,
                       lane, lanes);
      break;
    case 8:
      lanes_copy_words(reinterpret_cast<const uint2*>(src), reinterpret_cast<uint2*>(dst), words,
                       lane, lanes);
      break;
    default:
      lanes_copy_words(reinterpret_cast<const unsigned*>(src), reinterpret_cast<unsigned*>(dst),
                       words, lane, lanes);
      break;
  }
  for (std::uint64_t i = body + lane; i < n; i += lanes) dst[i] = src[i];
}

// Work item `item` is piece item % pieces of run item / pieces. Pieces are 16-byte multiples, so
// each keeps its run's alignment.
template <unsigned Lanes>
__global__ void __launch_bounds__(256) gather_runs_kernel(gather_args a) {
  using gpufeed::detail::device_decode::gather_run;
  constexpr unsigned full = 0xffffffffu, per_warp = 32 / Lanes;
  const unsigned lane = threadIdx.x % 32, group = lane / Lanes, rank = lane % Lanes;
  const std::uint64_t items = a.run_count * a.pieces;
  const std::uint64_t warps = static_cast<std::uint64_t>(gridDim.x) * (blockDim.x / 32);
  const std::uint64_t warp = static_cast<std::uint64_t>(blockIdx.x) * (blockDim.x / 32) +
                             threadIdx.x / 32;
  for (std::uint64_t base = warp * 32; base < items; base += warps * 32) {
    gather_run mine{};
    if (base + lane < items) mine = a.runs[(base + lane) / a.pieces];
    const std::uint64_t here = items - base < 32 ? items - base : 32;
    for (unsigned k = 0; k < 32; k += per_warp) {
      const unsigned from = k + group;  // the lane holding this group's item
      const std::uint64_t src = __shfl_sync(full, mine.src, from);
      const std::uint64_t dst = __shfl_sync(full, mine.dst, from);
      const std::uint64_t len = __shfl_sync(full, mine.len, from);
      if (k >= here) break;  // uniform across the warp
      if (from >= here) continue;
      const std::uint64_t item = base + from;
      const std::uint32_t piece = static_cast<std::uint32_t>(item % a.pieces);
      const bool inside = len <= a.cache_bytes && src <= a.cache_bytes - len &&
                          len <= a.dst_bytes && dst <= a.dst_bytes - len;
      if (!inside) {
        if (piece == 0 && rank == 0)
          *a.status = gpufeed::detail::device_decode::gather_out_of_range;
        continue;
      }
      const std::uint64_t step = ((len + a.pieces - 1) / a.pieces + 15) / 16 * 16;
      const std::uint64_t at = static_cast<std::uint64_t>(piece) * step;
      if (at >= len) continue;
      const std::uint64_t n = len - at < step ? len - at : step;
      lanes_copy(a.cache + src + at, a.dst + dst + at, n, rank, Lanes);
    }
  }
}

// Queues the gather on `stream`; nothing for no runs.
inline void launch_gather_runs(const gather_args& a, cudaStream_t stream) {
  if (a.run_count == 0) return;
  constexpr unsigned threads = 256;
  const std::uint64_t tasks = ceil_div(a.run_count * a.pieces, 32);  // one a warp
  const unsigned blocks = grid_blocks(ceil_div(tasks, threads / 32));
  if (a.lanes <= 8)
    gather_runs_kernel<8><<<blocks, threads, 0, stream>>>(a);
  else if (a.lanes <= 16)
    gather_runs_kernel<16><<<blocks, threads, 0, stream>>>(a);
  else
    gather_runs_kernel<32><<<blocks, threads, 0, stream>>>(a);
  check_launch("gather_runs_kernel");
}

}  // namespace gpufeed::cuda::detail
