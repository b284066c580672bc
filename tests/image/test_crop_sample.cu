// The fused GPU crop's per-pixel arithmetic (detail/image/crop_sample.hpp), run on the host: for
// JPEGs decoded at full size it writes the same bytes as the CPU record transforms
// (random_resized_crop_transform / center_crop_transform with dct_scaling = false) with the same
// (seed, epoch, record), for several image sizes, output sizes, flips, source layouts
// (interleaved, planar with padded pitches) and output layouts; the float outputs equal the CPU
// bytes put through cuda::normalizer's formula, and the half / bfloat16 bits equal CUDA's own
// __float2half_rn / __float2bfloat16_rn of those floats. Built by nvcc so the CUDA conversions
// and the kernel header are at hand; runs without a GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>
#include <turbojpeg.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include "gpufeed/cuda/detail/crop_kernels.cuh"
#include "gpufeed/detail/image/crop_sample.hpp"
#include "gpufeed/image/record_transforms.hpp"
#include "image_test_util.hpp"
#include "tj_encode.hpp"

using namespace gpufeed;
namespace di = gpufeed::detail::image;

namespace {

std::vector<std::byte> encode(const test::pixels& p, int quality) {
  return test::tj_encode(p, TJSAMP_420, 0, quality);
}

// A decoded image in both layouts the fused crop reads: interleaved as TurboJPEG wrote it, and
// three planes with padded pitches (as nvJPEG's planar output may have).
struct decoded_image {
  image::rgb_image rgb;
  std::vector<std::uint8_t> planes[3];
  std::size_t plane_pitch = 0;

  explicit decoded_image(std::span<const std::byte> jpeg) {
    image::image_decoder dec;
    dec.decode(jpeg, rgb);
    plane_pitch = static_cast<std::size_t>(rgb.width()) + 13;
    for (int c = 0; c < 3; ++c) {
      planes[c].assign(plane_pitch * static_cast<std::size_t>(rgb.height()), 0xAB);
      for (int y = 0; y < rgb.height(); ++y)
        for (int x = 0; x < rgb.width(); ++x)
          planes[c][static_cast<std::size_t>(y) * plane_pitch + static_cast<std::size_t>(x)] =
              rgb.data()[(static_cast<std::size_t>(y) * static_cast<std::size_t>(rgb.width()) +
                          static_cast<std::size_t>(x)) * 3 + static_cast<std::size_t>(c)];
    }
  }
  di::crop_source source(bool planar) const {
    di::crop_source s;
    s.width = rgb.width();
    s.height = rgb.height();
    s.interleaved = !planar;
    if (!planar) {
      s.plane[0] = rgb.data();
      s.pitch[0] = static_cast<std::size_t>(rgb.width()) * 3;
      return s;
    }
    for (int c = 0; c < 3; ++c) {
      s.plane[c] = planes[c].data();
      s.pitch[c] = plane_pitch;
    }
    return s;
  }
};

// Every value of an out_w x out_h record of type t through the fused function.
std::vector<std::byte> fused(const di::crop_source& s, const di::crop_geometry& g, int out_w,
                             int out_h, di::crop_dtype t, bool chw, const di::crop_normalize& n) {
  std::vector<std::byte> out(static_cast<std::size_t>(out_w) * static_cast<std::size_t>(out_h) *
                             3 * di::crop_dtype_size(t));
  for (int y = 0; y < out_h; ++y)
    for (int x = 0; x < out_w; ++x) {
      std::uint8_t rgb[3];
      di::crop_pixel(s, g, x, y, rgb);
      for (int c = 0; c < 3; ++c)
        di::store_crop_value(out.data(), t, chw, out_w, out_h, x, y, c, rgb[c], n);
    }
  return out;
}

// The CPU bytes (u8, layout as given) put through the normaliser's formula and CUDA's rounding.
std::vector<std::byte> normalised(const std::vector<std::byte>& u8, int out_w, int out_h, bool chw,
                                  di::crop_dtype t, const di::crop_normalize& n) {
  const std::size_t count = u8.size(), plane = static_cast<std::size_t>(out_w) * static_cast<std::size_t>(out_h);
  std::vector<std::byte> out(count * di::crop_dtype_size(t));
  for (std::size_t j = 0; j < count; ++j) {
    const std::size_t c = chw ? j / plane : j % 3;
    const auto x = static_cast<float>(static_cast<std::uint8_t>(u8[j]));
    const float a = x * n.scale;
    const float b = a - n.mean[c];
    const float f = b * n.inv_std[c];
    if (t == di::crop_dtype::f32) {
      std::memcpy(out.data() + j * 4, &f, 4);
    } else if (t == di::crop_dtype::f16) {
      const __half h = __float2half_rn(f);
      std::memcpy(out.data() + j * 2, &h, 2);
    } else {
      const __nv_bfloat16 h = __float2bfloat16_rn(f);
      std::memcpy(out.data() + j * 2, &h, 2);
    }
  }
  return out;
}

const di::crop_normalize imagenet{1.0f / 255, {0.485f, 0.456f, 0.406f}, {1 / 0.229f, 1 / 0.224f, 1 / 0.225f}};

void check_all_outputs(const decoded_image& d, const di::crop_geometry& g, int out_w, int out_h,
                       bool chw, const std::vector<std::byte>& cpu) {
  for (bool planar : {false, true}) {
    CAPTURE(planar);
    const di::crop_source s = d.source(planar);
    CHECK(fused(s, g, out_w, out_h, di::crop_dtype::u8, chw, {}) == cpu);
    for (auto t : {di::crop_dtype::f32, di::crop_dtype::f16, di::crop_dtype::bf16}) {
      CAPTURE(static_cast<int>(t));
      CHECK(fused(s, g, out_w, out_h, t, chw, imagenet) == normalised(cpu, out_w, out_h, chw, t, imagenet));
    }
  }
}

}  // namespace

TEST_CASE("fused crop: the bytes of random_resized_crop_transform at full-size decode") {
  struct size_case { int w, h, out; };
  const size_case sizes[] = {{97, 61, 32}, {640, 480, 224}, {300, 800, 64}, {50, 40, 100}, {1999, 1003, 17}};
  for (const auto& sc : sizes) {
    const auto jpeg = encode(test::synthetic_picture(sc.w, sc.h, 3, static_cast<unsigned>(sc.w)), 90);
    const decoded_image d(jpeg);
    for (auto layout : {image::pixel_layout::hwc, image::pixel_layout::chw}) {
      image::train_crop_options o;
      o.size = sc.out;
      o.layout = layout;
      o.dct_scaling = false;
      const record_transform tr = image::random_resized_crop_transform(o);
      for (std::uint64_t rec = 0; rec < 4; ++rec) {
        CAPTURE(sc.w);
        CAPTURE(sc.out);
        CAPTURE(rec);
        std::vector<std::byte> cpu(static_cast<std::size_t>(sc.out) * sc.out * 3);
        record_input in;
        in.bytes = jpeg;
        in.index = rec;
        record_rng rng(7, 3, rec);
        tr(in, cpu, rng);
        // The same draws, in the same order, as train_crop: the box, then the flip.
        record_rng again(7, 3, rec);
        const image::crop_box box = image::random_resized_crop_box(sc.w, sc.h, again, o.crop);
        const bool flip = image::coin(again);
        const auto g = di::make_crop_geometry(sc.w, sc.h, box.x, box.y, box.width, box.height,
                                              sc.out, sc.out, flip);
        check_all_outputs(d, g, sc.out, sc.out, layout == image::pixel_layout::chw, cpu);
      }
    }
  }
}

TEST_CASE("fused crop: center_crop_transform's fractional boxes, and non-square outputs") {
  const auto jpeg = encode(test::synthetic_picture(517, 389, 3, 5), 85);
  const decoded_image d(jpeg);
  for (int resize : {256, 100, 600}) {
    image::eval_crop_options o;
    o.resize = resize;
    o.size = 96;
    o.dct_scaling = false;
    const record_transform tr = image::center_crop_transform(o);
    std::vector<std::byte> cpu(96 * 96 * 3);
    record_input in;
    in.bytes = jpeg;
    record_rng rng(1, 0, 0);
    tr(in, cpu, rng);
    const image::crop_box box = image::resize_center_crop_box(517, 389, resize, 96);
    const auto g = di::make_crop_geometry(517, 389, box.x, box.y, box.width, box.height, 96, 96, false);
    CAPTURE(resize);
    check_all_outputs(d, g, 96, 96, false, cpu);
  }
  // resize_box into a non-square output, flipped by hand, against the fused function.
  const image::crop_box boxes[] = {{3.25, 7.5, 200.5, 101.0}, {0, 0, 517, 389}, {500, 380, 17, 9}};
  for (const auto& b : boxes) {
    for (bool flip : {false, true}) {
      image::rgb_image out(150, 41, 3);
      image::resize_box(const_cast<image::rgb_image&>(d.rgb).view(), b, out.view());
      if (flip) image::flip_horizontal(out.view());
      std::vector<std::byte> cpu(out.size_bytes());
      std::memcpy(cpu.data(), out.data(), cpu.size());
      const auto g = di::make_crop_geometry(517, 389, b.x, b.y, b.width, b.height, 150, 41, flip);
      CAPTURE(b.width);
      CAPTURE(flip);
      check_all_outputs(d, g, 150, 41, false, cpu);
    }
  }
}

TEST_CASE("half_bits / bfloat16_bits round as __float2half_rn / __float2bfloat16_rn") {
  std::mt19937_64 g(11);
  auto check = [](float f) {
    const __half h = __float2half_rn(f);
    const __nv_bfloat16 b = __float2bfloat16_rn(f);
    std::uint16_t hb, bb;
    std::memcpy(&hb, &h, 2);
    std::memcpy(&bb, &b, 2);
    CHECK(di::half_bits(f) == hb);
    CHECK(di::bfloat16_bits(f) == bb);
  };
  for (int i = 0; i < 200000; ++i) {
    const auto u = static_cast<std::uint32_t>(g());
    float f;
    std::memcpy(&f, &u, 4);
    if (f != f) continue;  // NaN payloads are not part of the contract
    check(f);
  }
  // Every float around the half's subnormal, normal and overflow boundaries.
  for (std::uint32_t base : {0x33000000u, 0x33800000u, 0x38800000u, 0x387fc000u, 0x477fe000u, 0x477ff000u})
    for (std::uint32_t d = 0; d < 20000; ++d)
      for (std::uint32_t sign : {0u, 0x80000000u}) {
        const std::uint32_t u = (base - 10000 + d) | sign;
        float f;
        std::memcpy(&f, &u, 4);
        check(f);
      }
}

TEST_CASE("resample tables: the CPU resampler's taps are the per-pixel function's") {
  // resample_axis::build goes through window_of / tap_weight; spot-check its sums are 2^22-ish
  // and its windows inside the image, for shrinking, enlarging and fractional boxes.
  for (double len : {1.0, 3.5, 224.0, 999.25, 4000.0})
    for (int out : {1, 7, 224}) {
      di::resample_axis a;
      a.build(0.5, len, 4001, out);
      for (int i = 0; i < out; ++i) {
        std::int64_t sum = 0;
        for (int k = 0; k < a.count[static_cast<std::size_t>(i)]; ++k)
          sum += a.weights[static_cast<std::size_t>(i) * static_cast<std::size_t>(a.taps) + static_cast<std::size_t>(k)];
        CHECK(std::llabs(sum - (std::int64_t{1} << 22)) <= a.taps);
        CHECK(a.first[static_cast<std::size_t>(i)] >= 0);
        CHECK(a.first[static_cast<std::size_t>(i)] + a.count[static_cast<std::size_t>(i)] <= 4001);
      }
    }
}
