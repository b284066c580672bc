// gpufeed::detail::image — one output pixel of a fused crop + resize + horizontal flip +
// normalise, computed straight from the decoded image; compiled for the host (tests, a CPU
// reference) and by nvcc for the GPU (cuda/detail/crop_kernels.cuh launches it over a batch).
//
// Contract: for a decoded RGB image, a box, an output size and a flip flag, crop_pixel returns
// the bytes train_crop / eval_crop write for that pixel when they decode at full size
// (dct_scaling = false): the same resample (resample_taps.hpp's taps and weights), the same
// intermediate rounding — the CPU resizes rows first into an 8-bit intermediate, so here each
// row the vertical filter reads is first reduced horizontally and rounded by clip8 — then the
// vertical sum, in integers, whose order does not change the result. The flip mirrors the
// output: column x is column out_w - 1 - x of the unflipped resize, as flip_horizontal does.
//
// normalize_value is cuda::normalizer's formula with each step rounded to nearest: ((float)x *
// scale - mean) * inv_std; half_bits / bfloat16_bits round a float to nearest even like
// __float2half_rn / __float2bfloat16_rn for every finite float and infinity (NaN becomes a quiet
// NaN; the normaliser never produces one from finite parameters).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gpufeed/detail/host_device.hpp"
#include "gpufeed/detail/image/resample_taps.hpp"

namespace gpufeed::detail::image {

// A decoded 8-bit RGB image: interleaved (plane[0], pitch[0] bytes per row; nvJPEG's RGBI,
// TurboJPEG's RGB) or planar (plane[c], pitch[c]; nvJPEG's RGB).
struct crop_source {
  const std::uint8_t* plane[3] = {nullptr, nullptr, nullptr};
  std::size_t pitch[3] = {0, 0, 0};
  int width = 0, height = 0;
  bool interleaved = true;

  GPUFEED_HOST_DEVICE std::uint8_t at(int x, int y, int c) const {
    if (interleaved)
      return plane[0][static_cast<std::size_t>(y) * pitch[0] + static_cast<std::size_t>(x) * 3 +
                      static_cast<std::size_t>(c)];
    return plane[c][static_cast<std::size_t>(y) * pitch[c] + static_cast<std::size_t>(x)];
  }
};

// Where in the source the output comes from: box [x0, x0 + bw) x [y0, y0 + bh) of a source of
// the given size resized to out_w x out_h, then mirrored when `flip`.
struct crop_geometry {
  axis_filter h, v;
  bool flip = false;
};

GPUFEED_HOST_DEVICE inline crop_geometry make_crop_geometry(int src_w, int src_h, double x0,
                                                            double y0, double bw, double bh,
                                                            int out_w, int out_h, bool flip) {
  crop_geometry g;
  g.h = make_axis_filter(x0, bw, src_w, out_w);
  g.v = make_axis_filter(y0, bh, src_h, out_h);
  g.flip = flip;
  return g;
}

// Horizontal weights a thread keeps for all the rows it reads; a wider filter (a box more than
// about 15 times the output) recomputes them per row, with the same result.
inline constexpr int crop_cached_taps = 32;

// The resampled (and flipped) RGB pixel at output column x, row y.
GPUFEED_HOST_DEVICE inline void crop_pixel(const crop_source& s, const crop_geometry& g, int x,
                                           int y, std::uint8_t (&rgb)[3]) {
  const int xs = g.flip ? g.h.out - 1 - x : x;
  const axis_window hw = window_of(g.h, xs);
  const axis_window vw = window_of(g.v, y);
  std::int32_t cached[crop_cached_taps];
  const bool cache = hw.n <= crop_cached_taps;
  if (cache)
    for (int k = 0; k < hw.n; ++k) cached[k] = tap_weight(g.h, hw, k);
  std::int32_t acc[3] = {0, 0, 0};
  for (int kv = 0; kv < vw.n; ++kv) {
    const std::int32_t wv = tap_weight(g.v, vw, kv);
    const int row = vw.lo + kv;
    std::int32_t mid[3] = {0, 0, 0};
    for (int kh = 0; kh < hw.n; ++kh) {
      const std::int32_t wh = cache ? cached[kh] : tap_weight(g.h, hw, kh);
      const int col = hw.lo + kh;
      for (int c = 0; c < 3; ++c) mid[c] += wh * static_cast<std::int32_t>(s.at(col, row, c));
    }
    for (int c = 0; c < 3; ++c) acc[c] += wv * static_cast<std::int32_t>(clip8(mid[c]));
  }
  for (int c = 0; c < 3; ++c) rgb[c] = clip8(acc[c]);
}

// ((float)x * scale - mean) * inv_std, each step rounded to nearest (no FMA).
GPUFEED_HOST_DEVICE inline float normalize_value(std::uint8_t x, float scale, float mean,
                                                 float inv_std) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(__fsub_rn(__fmul_rn(static_cast<float>(x), scale), mean), inv_std);
#else
  const volatile float a = static_cast<float>(x) * scale;  // volatile: no FMA on any host
  const float b = a - mean;
  return b * inv_std;
#endif
}

GPUFEED_HOST_DEVICE inline std::uint32_t float_bits(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

// IEEE binary16 bits of v, rounded to nearest even; overflow to infinity.
GPUFEED_HOST_DEVICE inline std::uint16_t half_bits(float v) {
  const std::uint32_t f = float_bits(v);
  const auto sign = static_cast<std::uint16_t>((f >> 16) & 0x8000u);
  const std::uint32_t a = f & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7fffu);  // NaN
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  std::uint32_t q, rem, half;
  if (a < 0x38800000u) {  // below 2^-14: a subnormal half (or zero), in units of 2^-24
    const std::uint32_t e = a >> 23;
    if (e < 102) return sign;  // below 2^-25
    const std::uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
    q = m >> shift;
    rem = m & ((1u << shift) - 1);
    half = 1u << (shift - 1);
  } else {  // rebias the exponent (127 -> 15), drop 13 mantissa bits
    const std::uint32_t r = a - 0x38000000u;
    q = r >> 13;
    rem = r & 0x1fffu;
    half = 0x1000u;
  }
  if (rem > half || (rem == half && (q & 1u))) ++q;  // a carry into the exponent is right
  return static_cast<std::uint16_t>(sign | q);
}

// bfloat16 bits of v, rounded to nearest even.
GPUFEED_HOST_DEVICE inline std::uint16_t bfloat16_bits(float v) {
  const std::uint32_t u = float_bits(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The output element types of a fused crop.
enum class crop_dtype : std::uint8_t { u8, f32, f16, bf16 };

GPUFEED_HOST_DEVICE constexpr std::size_t crop_dtype_size(crop_dtype t) {
  return t == crop_dtype::u8 ? 1 : (t == crop_dtype::f32 ? 4 : 2);
}

// Normalisation of a fused crop's float outputs (ignored for u8): per channel mean and 1/std.
struct crop_normalize {
  float scale = 1.0f;
  float mean[3] = {0, 0, 0};
  float inv_std[3] = {1, 1, 1};
};

// Writes channel c's value of output pixel (x, y) of an out_w x out_h record at `record`
// (HWC: interleaved pixels; CHW: three planes).
GPUFEED_HOST_DEVICE inline void store_crop_value(void* record, crop_dtype t, bool chw, int out_w,
                                                 int out_h, int x, int y, int c, std::uint8_t v,
                                                 const crop_normalize& n) {
  const std::size_t pixel = static_cast<std::size_t>(y) * static_cast<std::size_t>(out_w) +
                            static_cast<std::size_t>(x);
  const std::size_t j = chw ? static_cast<std::size_t>(c) * static_cast<std::size_t>(out_w) *
                                      static_cast<std::size_t>(out_h) + pixel
                            : pixel * 3 + static_cast<std::size_t>(c);
  if (t == crop_dtype::u8) {
    static_cast<std::uint8_t*>(record)[j] = v;
    return;
  }
  const float f = normalize_value(v, n.scale, n.mean[c], n.inv_std[c]);
  if (t == crop_dtype::f32)
    static_cast<float*>(record)[j] = f;
  else
    static_cast<std::uint16_t*>(record)[j] = t == crop_dtype::f16 ? half_bits(f) : bfloat16_bits(f);
}

}  // namespace gpufeed::detail::image
