// gpufeed::cuda::detail — the fused crop + resize + flip + normalise kernel: one launch for a
// whole batch of decoded images, each output pixel computed by detail/image/crop_sample.hpp's
// crop_pixel (the CPU resample's exact arithmetic) and written straight into the batch's
// records, in the output type and layout asked for.
//
// Launch shape: grid.y is the image (one crop_job each, in a small device array), grid.x covers
// the out_w * out_h pixels of one output, one pixel (three channels) per thread. Reads go
// through the read-only cache: neighbouring threads read overlapping source windows.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpufeed/cuda/detail/grid.hpp"
#include "gpufeed/detail/image/crop_sample.hpp"

namespace gpufeed::cuda::detail {

// One image of a batch: where its decoded pixels are, how its crop maps onto them, and whether
// the kernel writes it (skip: its record was written otherwise, e.g. by a CPU fallback decode).
struct crop_job {
  gpufeed::detail::image::crop_source src;
  gpufeed::detail::image::crop_geometry geometry;
  std::uint32_t record = 0;  // the output record this image fills
  std::uint32_t skip = 0;
};

// Everything the launch shares, passed by value (the launch captures it).
struct crop_launch {
  int out_w = 0, out_h = 0;
  std::size_t record_bytes = 0;  // distance between records in `out`
  gpufeed::detail::image::crop_normalize normalize{};
};

template <gpufeed::detail::image::crop_dtype T, bool Chw>
__global__ void __launch_bounds__(transform_threads)
    crop_kernel(const crop_job* __restrict__ jobs, void* __restrict__ out, crop_launch p) {
  const crop_job job = jobs[blockIdx.y];
  if (job.skip != 0) return;
  const unsigned pixel = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned pixels = static_cast<unsigned>(p.out_w) * static_cast<unsigned>(p.out_h);
  if (pixel >= pixels) return;
  const int x = static_cast<int>(pixel % static_cast<unsigned>(p.out_w));
  const int y = static_cast<int>(pixel / static_cast<unsigned>(p.out_w));
  std::uint8_t rgb[3];
  gpufeed::detail::image::crop_pixel(job.src, job.geometry, x, y, rgb);
  void* record = static_cast<std::byte*>(out) + static_cast<std::size_t>(job.record) * p.record_bytes;
#pragma unroll
  for (int c = 0; c < 3; ++c)
    gpufeed::detail::image::store_crop_value(record, T, Chw, p.out_w, p.out_h, x, y, c, rgb[c],
                                             p.normalize);
}

// Queues the kernel for `jobs` (device memory, n of them) on `stream`. Every record index is
// below the number of records `out` holds; the sources stay valid until the kernel has run.
inline void launch_crop(const crop_job* jobs, std::uint32_t n, void* out,
                        gpufeed::detail::image::crop_dtype dtype, bool chw, const crop_launch& p,
                        cudaStream_t stream) {
  using gpufeed::detail::image::crop_dtype;
  if (n == 0) return;
  const std::uint64_t pixels = static_cast<std::uint64_t>(p.out_w) * static_cast<std::uint64_t>(p.out_h);
  const dim3 grid(static_cast<unsigned>(ceil_div(pixels, transform_threads)), n);
  const dim3 block(transform_threads);
  switch (dtype) {
    case crop_dtype::u8:
      if (chw) crop_kernel<crop_dtype::u8, true><<<grid, block, 0, stream>>>(jobs, out, p);
      else crop_kernel<crop_dtype::u8, false><<<grid, block, 0, stream>>>(jobs, out, p);
      break;
    case crop_dtype::f32:
      if (chw) crop_kernel<crop_dtype::f32, true><<<grid, block, 0, stream>>>(jobs, out, p);
      else crop_kernel<crop_dtype::f32, false><<<grid, block, 0, stream>>>(jobs, out, p);
      break;
    case crop_dtype::f16:
      if (chw) crop_kernel<crop_dtype::f16, true><<<grid, block, 0, stream>>>(jobs, out, p);
      else crop_kernel<crop_dtype::f16, false><<<grid, block, 0, stream>>>(jobs, out, p);
      break;
    case crop_dtype::bf16:
      if (chw) crop_kernel<crop_dtype::bf16, true><<<grid, block, 0, stream>>>(jobs, out, p);
      else crop_kernel<crop_dtype::bf16, false><<<grid, block, 0, stream>>>(jobs, out, p);
      break;
  }
  check_launch("crop_kernel launch");
}

}  // namespace gpufeed::cuda::detail
