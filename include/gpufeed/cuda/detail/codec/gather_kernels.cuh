// gpufeed::cuda::detail — the gather kernel of the device decode path: copies a batch's runs
// (detail/device_decode/work_image.hpp: gather_run) from the device cache of decoded units into
// the batch's slot, and its launcher.
//
// Runs come many and small (rows of a few hundred bytes: tens of thousands a batch) or few and
// large (whole chunks, 64 KiB to MiBs). Each warp reads the headers of up to 32 consecutive work
// items side by side (one per lane), then copies them in groups of `lanes` lanes, 32 / lanes
// items at a time; a large run is cut into `pieces` items, so few runs still spread over every
// SM. Copies
// use the widest word (16, 8 or 4 bytes) to which source and destination can be aligned
// together, with a few loads in flight per lane before the stores, or 4-byte words shifted
// together from the source's when their alignments differ below 4. A run outside the cache or
// the slot is checked before anything is read and never copied: a status word, never a fault.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/detail/assembly_kernels.hpp"
#include "gpufeed/cuda/detail/codec/gather_lanes.hpp"
#include "gpufeed/cuda/detail/grid.hpp"

namespace gpufeed::cuda::detail {

// Work item `item` is piece item % pieces of run item / pieces (gather_lanes.hpp copies it).
template <unsigned Lanes>
__global__ void __launch_bounds__(256) gather_runs_kernel(gather_args a) {
  using gpufeed::detail::device_decode::gather_run;
  constexpr unsigned full = 0xffffffffu, per_warp = 32 / Lanes;
  const unsigned lane = threadIdx.x % 32, group = lane / Lanes, rank = lane % Lanes;
  const std::uint64_t items = a.run_count * a.pieces;
  const std::uint64_t warps = static_cast<std::uint64_t>(gridDim.x) * (blockDim.x / 32);
  const std::uint64_t warp = static_cast<std::uint64_t>(blockIdx.x) * (blockDim.x / 32) +
                             threadIdx.x / 32;
  const unsigned span = a.span;
  for (std::uint64_t base = warp * span; base < items; base += warps * span) {
    gather_run mine{};
    if (lane < span && base + lane < items) mine = a.runs[(base + lane) / a.pieces];
    const std::uint64_t here = items - base < span ? items - base : span;
    for (unsigned k = 0; k < span; k += per_warp) {
      const unsigned from = k + group;  // the lane holding this group's item
      const std::uint64_t src = __shfl_sync(full, mine.src, from);
      const std::uint64_t dst = __shfl_sync(full, mine.dst, from);
      const std::uint64_t len = __shfl_sync(full, mine.len, from);
      if (k >= here) break;  // uniform across the warp
      if (from >= here) continue;
      const std::uint64_t item = base + from;
      const auto piece = static_cast<std::uint32_t>(item % a.pieces);
      const gather_run r{src, dst, len};
      if (gather_run_inside(r, a.cache_bytes, a.dst_bytes))
        gather_piece(a.cache, a.dst, r, piece, a.pieces, rank, Lanes);
      else if (piece == 0 && rank == 0)
        *a.status = gpufeed::detail::device_decode::gather_out_of_range;
    }
  }
}

// Queues the gather on `stream`; nothing for no runs.
inline void launch_gather_runs(const gather_args& a, cudaStream_t stream) {
  if (a.run_count == 0) return;
  constexpr unsigned threads = 256;
  const std::uint64_t tasks = ceil_div(a.run_count * a.pieces, a.span);  // one a warp
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
