// gpufeed::cuda::detail — the kernels a device engine's decode path launches, as a table of
// launchers. Host-compilable: the engine (device_target.hpp) is included by .cpp files, which
// cannot define kernels, so it reaches the kernels through this table; a CUDA translation unit
// fills it by including gpufeed/cuda/device_decode.cuh (kernels only in .cuh, docs/design.md,
// Layout). Until one does, the engine offers no unit_decoder.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

#include "gpufeed/detail/codec/gpu_units.hpp"
#include "gpufeed/detail/device_decode/work_image.hpp"

namespace gpufeed::cuda::detail {

// One batch's gather (detail/device_decode/work_image.hpp: gather_run), all in device memory.
// A run with src + len > cache_bytes or dst + len > dst_bytes is not copied; the kernel sets
// `*status` (zeroed before the launch) to device_decode::gather_out_of_range instead.
struct gather_args {
  const std::uint8_t* cache = nullptr;
  std::uint64_t cache_bytes = 0;
  std::uint8_t* dst = nullptr;  // the batch's data region in its slot
  std::uint64_t dst_bytes = 0;  // from dst to the slot's end
  const gpufeed::detail::device_decode::gather_run* runs = nullptr;
  std::uint64_t run_count = 0;
  // Work items per run: a run is copied in `pieces` parts by as many lane groups, so that a
  // batch of few large runs still spreads over the GPU. 1 for many runs.
  std::uint32_t pieces = 1;
  // Lanes that copy one item: 32 (a warp) for large items, fewer for small ones, so that a warp
  // has several small runs' loads in flight at once. 8, 16 or 32.
  std::uint32_t lanes = 32;
  // Items one warp takes at a time (their headers read side by side): a multiple of 32 / lanes,
  // at most 32; fewer when items are few, so that they spread over more warps.
  std::uint32_t span = 32;
  std::uint32_t* status = nullptr;
};

struct assembly_kernels {
  // launch_decode_units (codec/unit_kernels.cuh) with the stage in the cache itself: each staged
  // unit's stage lies in its own cache place.
  void (*decode)(const std::uint8_t* src, std::uint8_t* cache,
                 const gpufeed::detail::codec::gpu_unit* units, std::uint32_t count,
                 std::uint32_t largest_scratch, std::uint32_t* status, cudaStream_t stream);
  // launch_gather_runs (gather_kernels.cuh); nothing for no runs.
  void (*gather)(const gather_args& args, cudaStream_t stream);
};

// The table a CUDA translation unit registered, or nullptr. One per program (an inline
// function's static), whichever translation unit filled it: every one fills it alike.
inline std::atomic<const assembly_kernels*>& registered_assembly_kernels() noexcept {
  static std::atomic<const assembly_kernels*> table{nullptr};
  return table;
}

}  // namespace gpufeed::cuda::detail
