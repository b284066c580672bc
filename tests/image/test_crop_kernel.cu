// The fused crop kernel (cuda/detail/crop_kernels.cuh) on a GPU: one launch over a batch of
// images of different sizes and source layouts writes, for every output type and layout, the
// same bytes as the per-pixel function run on the host (which test_crop_sample ties to the CPU
// record transforms), fills each job's record and leaves skipped records untouched.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/detail/crop_kernels.cuh"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/stream.hpp"
#include "gpufeed/detail/image/crop_sample.hpp"

namespace gpufeed {
namespace {

namespace di = gpufeed::detail::image;

struct test_image {
  int w = 0, h = 0;
  bool planar = false;
  std::size_t pitch = 0;
  std::vector<std::uint8_t> bytes;  // interleaved rows, or three planes one after another
  cuda::device_buffer device;

  test_image(std::mt19937& rng, int width, int height, bool planar_) : w(width), h(height), planar(planar_) {
    pitch = planar ? static_cast<std::size_t>(w) + 5 : static_cast<std::size_t>(w) * 3 + 7;
    bytes.resize(pitch * static_cast<std::size_t>(h) * (planar ? 3 : 1));
    for (std::size_t i = 0; i < bytes.size(); ++i)  // smooth ramps plus noise
      bytes[i] = static_cast<std::uint8_t>((i * 7 + i / pitch * 3 + (rng() % 40)) & 0xffu);
    device = cuda::device_buffer(bytes.size());
    GPUFEED_CUDA_TRY(cudaMemcpy(device.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  di::crop_source source(const std::uint8_t* base) const {
    di::crop_source s;
    s.width = w;
    s.height = h;
    s.interleaved = !planar;
    for (int c = 0; c < (planar ? 3 : 1); ++c) {
      s.plane[c] = base + static_cast<std::size_t>(c) * pitch * static_cast<std::size_t>(h);
      s.pitch[c] = pitch;
    }
    return s;
  }
};

}  // namespace

TEST_CASE("crop kernel: one launch over a batch equals the host per-pixel function") {
  std::mt19937 rng(5);
  std::vector<test_image> images;
  const int dims[][2] = {{640, 480}, {97, 61}, {1500, 900}, {50, 40}, {333, 777}, {4000, 3000}};
  for (std::size_t i = 0; i < std::size(dims); ++i)
    images.emplace_back(rng, dims[i][0], dims[i][1], i % 2 == 1);

  const int out_w = 224, out_h = 160;
  const std::uint32_t records = static_cast<std::uint32_t>(images.size()) + 1;
  std::vector<cuda::detail::crop_job> jobs(images.size());
  for (std::size_t i = 0; i < images.size(); ++i) {
    const auto& im = images[i];
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const double bw = 1 + (im.w - 1) * u(rng), bh = 1 + (im.h - 1) * u(rng);
    const double x0 = (im.w - bw) * u(rng), y0 = (im.h - bh) * u(rng);
    jobs[i].src = im.source(im.device.as<const std::uint8_t>());
    jobs[i].geometry = di::make_crop_geometry(im.w, im.h, x0, y0, bw, bh, out_w, out_h, i % 3 == 0);
    jobs[i].record = static_cast<std::uint32_t>(images.size() - i);  // reversed; record 0 unused
    jobs[i].skip = i == 2 ? 1 : 0;
  }
  cuda::device_buffer djobs(jobs.size() * sizeof(cuda::detail::crop_job));
  GPUFEED_CUDA_TRY(cudaMemcpy(djobs.data(), jobs.data(), djobs.size(), cudaMemcpyHostToDevice));
  cuda::stream s;

  const di::crop_normalize n{1.0f / 255, {0.485f, 0.456f, 0.406f}, {1 / 0.229f, 1 / 0.224f, 1 / 0.225f}};
  for (auto t : {di::crop_dtype::u8, di::crop_dtype::f32, di::crop_dtype::f16, di::crop_dtype::bf16})
    for (bool chw : {false, true}) {
      CAPTURE(static_cast<int>(t));
      CAPTURE(chw);
      cuda::detail::crop_launch p;
      p.out_w = out_w;
      p.out_h = out_h;
      p.record_bytes = static_cast<std::size_t>(out_w) * out_h * 3 * di::crop_dtype_size(t);
      p.normalize = n;
      cuda::device_buffer out(p.record_bytes * records);
      GPUFEED_CUDA_TRY(cudaMemsetAsync(out.data(), 0x5A, out.size(), s));
      cuda::detail::launch_crop(djobs.as<cuda::detail::crop_job>(),
                                static_cast<std::uint32_t>(jobs.size()), out.data(), t, chw, p, s);
      std::vector<std::uint8_t> got(out.size());
      GPUFEED_CUDA_TRY(cudaMemcpyAsync(got.data(), out.data(), out.size(), cudaMemcpyDeviceToHost, s));
      GPUFEED_CUDA_TRY(cudaStreamSynchronize(s));

      std::vector<std::uint8_t> want(out.size(), 0x5A);
      for (std::size_t i = 0; i < images.size(); ++i) {
        if (jobs[i].skip) continue;
        const di::crop_source hs = images[i].source(images[i].bytes.data());
        void* rec = want.data() + jobs[i].record * p.record_bytes;
        for (int y = 0; y < out_h; ++y)
          for (int x = 0; x < out_w; ++x) {
            std::uint8_t rgb[3];
            di::crop_pixel(hs, jobs[i].geometry, x, y, rgb);
            for (int c = 0; c < 3; ++c) di::store_crop_value(rec, t, chw, out_w, out_h, x, y, c, rgb[c], n);
          }
      }
      std::size_t differ = 0;
      for (std::size_t j = 0; j < got.size(); ++j) differ += got[j] != want[j] ? 1 : 0;
      CHECK(differ == 0);
    }
}

}  // namespace gpufeed
