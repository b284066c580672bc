// gpufeed::detail::image — the taps and 22-bit weights of one output sample of resample.hpp's
// triangle filter, as plain functions that nvcc also compiles for the GPU: the CPU resampler
// builds its tables through them and the fused crop kernel (crop_sample.hpp) evaluates them per
// pixel, so both paths weigh the same input pixels with the same integers.
//
// Why the results are the same bits on the host and the GPU: every floating-point step is one
// IEEE double operation rounded to nearest (on the GPU through __dadd_rn / __dmul_rn / __ddiv_rn,
// which nvcc never contracts into an FMA; on the host the product passes through a volatile, so
// a compiler that contracts by default — GCC on aarch64 — cannot fuse it with the following add),
// and floor/ceil/round are exact integer conversions of small non-negative values rather than
// library calls.
//
// The filter (PIL's BILINEAR): output sample i has its centre at c = in0 + (i + 0.5) * scale
// (scale = in_len / out); it weighs the input pixels within support = max(scale, 1) of c by the
// triangle 1 - |x| / support, normalised; only pixels inside [0, in_size) take part.
#pragma once

#include <cstdint>

#include "gpufeed/detail/host_device.hpp"

namespace gpufeed::detail::image {

inline constexpr int resample_bits = 22;  // weights' fixed point; 255 * 2^22 * (1 + eps) < 2^31

GPUFEED_HOST_DEVICE inline double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
GPUFEED_HOST_DEVICE inline double sub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
GPUFEED_HOST_DEVICE inline double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  const volatile double r = a * b;
  return r;
#endif
}
GPUFEED_HOST_DEVICE inline double div_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

// std::lround of a value in [0, 2^31): the fraction v - trunc(v) is exact in double.
GPUFEED_HOST_DEVICE inline std::int32_t round_nonnegative(double v) {
  const auto t = static_cast<std::int32_t>(v);
  return sub_rn(v, static_cast<double>(t)) >= 0.5 ? t + 1 : t;
}

// std::ceil of a value in [1, 2^31).
GPUFEED_HOST_DEVICE inline int ceil_positive(double v) {
  const auto t = static_cast<int>(v);
  return static_cast<double>(t) < v ? t + 1 : t;
}

// One axis of a resize: input pixels [in0, in0 + in_len) of an axis of in_size pixels onto out
// samples.
struct axis_filter {
  double in0 = 0, scale = 1, support = 1;  // support = max(scale, 1), also the triangle's width
  int in_size = 0, out = 0;
  int taps = 0;  // most taps any sample has: 2 * ceil(support) + 1
};

GPUFEED_HOST_DEVICE inline axis_filter make_axis_filter(double in0, double in_len, int in_size,
                                                        int out) {
  axis_filter a;
  a.in0 = in0;
  a.scale = div_rn(in_len, static_cast<double>(out));
  a.support = a.scale < 1.0 ? 1.0 : a.scale;
  a.in_size = in_size;
  a.out = out;
  a.taps = ceil_positive(a.support) * 2 + 1;
  return a;
}

// The taps of one output sample: input pixels [lo, lo + n), their centre and weight sum.
struct axis_window {
  int lo = 0, n = 0;
  double centre = 0, sum = 0;
  bool nearest = false;  // no pixel within the support: the nearest one alone (weight 1)
};

// The triangle's unnormalised weight of input pixel lo + k for a sample centred at `centre`.
GPUFEED_HOST_DEVICE inline double tap_raw(const axis_filter& a, int lo, int k, double centre) {
  const double x = div_rn(add_rn(sub_rn(static_cast<double>(lo + k), centre), 0.5), a.support);
  const double t = sub_rn(1.0, x < 0 ? -x : x);
  return t > 0.0 ? t : 0.0;
}

GPUFEED_HOST_DEVICE inline axis_window window_of(const axis_filter& a, int i) {
  axis_window w;
  w.centre = add_rn(a.in0, mul_rn(static_cast<double>(i) + 0.5, a.scale));
  int lo = static_cast<int>(add_rn(sub_rn(w.centre, a.support), 0.5));
  int hi = static_cast<int>(add_rn(add_rn(w.centre, a.support), 0.5));
  lo = lo < 0 ? 0 : (lo > a.in_size - 1 ? a.in_size - 1 : lo);
  hi = hi < lo + 1 ? lo + 1 : (hi > a.in_size ? a.in_size : hi);
  w.lo = lo;
  w.n = hi - lo < a.taps ? hi - lo : a.taps;
  for (int k = 0; k < w.n; ++k) w.sum = add_rn(w.sum, tap_raw(a, lo, k, w.centre));
  if (w.sum <= 0) w.nearest = true;
  return w;
}

// Weight of tap k (0 <= k < w.n) in 2^-22 units.
GPUFEED_HOST_DEVICE inline std::int32_t tap_weight(const axis_filter& a, const axis_window& w,
                                                   int k) {
  if (w.nearest) return k == 0 ? (std::int32_t{1} << resample_bits) : 0;
  return round_nonnegative(mul_rn(div_rn(tap_raw(a, w.lo, k, w.centre), w.sum),
                                  static_cast<double>(std::int32_t{1} << resample_bits)));
}

// A 22-bit fixed-point sum back to 8 bits: rounded, clamped to [0, 255].
GPUFEED_HOST_DEVICE inline std::uint8_t clip8(std::int32_t acc) {
  const std::int32_t v = (acc + (std::int32_t{1} << (resample_bits - 1))) >> resample_bits;
  return static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

}  // namespace gpufeed::detail::image
