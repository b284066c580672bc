// gpufeed::detail::image — separable bilinear (triangle-filter) resampling of a box of an 8-bit
// image, written here rather than taken from a library. Why: Debian's libstb ships the deprecated
// stb_image_resize v1, which aborts the process (an assertion in
// stbir__normalize_downsample_coefficients) for some scale ratios — a crash on a record is not
// acceptable in a loader; ffmpeg's libswscale builds a context per (source, destination) size
// pair, and every image has its own size; libvips and pixman would be large dependencies for one
// filter.
//
// The method is PIL's BILINEAR resize (torchvision's default for PIL images): each output sample
// at centre c = box0 + (i + 0.5) * scale (scale = box size / output size) takes the input pixels
// within support = max(scale, 1) of c, weighted by the triangle 1 - |x| / max(scale, 1) and
// normalised: when shrinking, the filter widens (antialiasing); when enlarging it is plain
// bilinear interpolation. Edges: only pixels inside the image are weighed (renormalised).
// Weights are 22-bit fixed point (all positive: a sum of 255 * 2^22 fits int32), horizontal pass
// first over the rows the vertical pass needs, intermediate rounded to uint8, as PIL does.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpufeed/detail/image/resample_taps.hpp"
#include "gpufeed/image/image_view.hpp"

namespace gpufeed::detail::image {

// Per output sample: the first input index, the tap count, and `taps` weights at 22 bits
// (resample_taps.hpp computes them; the fused GPU crop evaluates the same functions).
struct resample_axis {
  static constexpr int bits = resample_bits;
  std::vector<int> first, count;
  std::vector<std::int32_t> weights;  // out * taps
  int taps = 0;

  // Input pixels [in0, in0 + in_len) of an axis of `in_size` pixels onto `out` samples.
  void build(double in0, double in_len, int in_size, int out) {
    const axis_filter a = make_axis_filter(in0, in_len, in_size, out);
    taps = a.taps;
    first.assign(static_cast<std::size_t>(out), 0);
    count.assign(static_cast<std::size_t>(out), 0);
    weights.assign(static_cast<std::size_t>(out) * static_cast<std::size_t>(taps), 0);
    for (int i = 0; i < out; ++i) {
      const axis_window w = window_of(a, i);
      first[static_cast<std::size_t>(i)] = w.lo;
      count[static_cast<std::size_t>(i)] = w.n;
      std::int32_t* dst = &weights[static_cast<std::size_t>(i) * static_cast<std::size_t>(taps)];
      for (int k = 0; k < w.n; ++k) dst[k] = tap_weight(a, w, k);
    }
  }
};

// Holds the coefficient tables and the intermediate rows between calls (one per thread).
class resampler {
 public:
  // Box [x0, x0 + bw) x [y0, y0 + bh) of src into all of dst; channel counts equal (1-4).
  void run(const gpufeed::image::image_view& src, double x0, double y0, double bw, double bh,
           const gpufeed::image::image_view& dst) {
    const int C = src.channels;
    h_.build(x0, bw, src.width, dst.width);
    v_.build(y0, bh, src.height, dst.height);
    // Rows of src the vertical pass reads.
    int row0 = src.height, row1 = 0;
    for (int i = 0; i < dst.height; ++i) {
      row0 = std::min(row0, v_.first[static_cast<std::size_t>(i)]);
      row1 = std::max(row1, v_.first[static_cast<std::size_t>(i)] + v_.count[static_cast<std::size_t>(i)]);
    }
    const std::size_t mid_stride = static_cast<std::size_t>(dst.width) * static_cast<std::size_t>(C);
    mid_.resize(static_cast<std::size_t>(row1 - row0) * mid_stride);
    for (int y = row0; y < row1; ++y) {
      const std::uint8_t* in = src.row(y);
      std::uint8_t* out = &mid_[static_cast<std::size_t>(y - row0) * mid_stride];
      for (int i = 0; i < dst.width; ++i) {
        const int lo = h_.first[static_cast<std::size_t>(i)], n = h_.count[static_cast<std::size_t>(i)];
        const std::int32_t* w = &h_.weights[static_cast<std::size_t>(i) * static_cast<std::size_t>(h_.taps)];
        if (C == 3) {  // RGB, the common case: the three channels in one pass over the taps
          std::int32_t r = 0, g = 0, b = 0;
          const std::uint8_t* p = in + static_cast<std::size_t>(lo) * 3;
          for (int k = 0; k < n; ++k, p += 3) {
            r += w[k] * p[0];
            g += w[k] * p[1];
            b += w[k] * p[2];
          }
          std::uint8_t* o = out + static_cast<std::size_t>(i) * 3;
          o[0] = clip8(r);
          o[1] = clip8(g);
          o[2] = clip8(b);
          continue;
        }
        for (int c = 0; c < C; ++c) {
          std::int32_t acc = 0;
          const std::uint8_t* p = in + static_cast<std::size_t>(lo) * static_cast<std::size_t>(C) + c;
          for (int k = 0; k < n; ++k) acc += w[k] * p[static_cast<std::size_t>(k) * static_cast<std::size_t>(C)];
          out[static_cast<std::size_t>(i) * static_cast<std::size_t>(C) + static_cast<std::size_t>(c)] = clip8(acc);
        }
      }
    }
    for (int j = 0; j < dst.height; ++j) {
      const int lo = v_.first[static_cast<std::size_t>(j)] - row0, n = v_.count[static_cast<std::size_t>(j)];
      const std::int32_t* w = &v_.weights[static_cast<std::size_t>(j) * static_cast<std::size_t>(v_.taps)];
      std::uint8_t* out = dst.row(j);
      // Taps outer, pixels inner: the inner loop runs along a row (the compiler vectorises it).
      acc_.assign(mid_stride, 0);
      std::int32_t* acc = acc_.data();
      for (int k = 0; k < n; ++k) {
        const std::uint8_t* p = &mid_[static_cast<std::size_t>(lo + k) * mid_stride];
        const std::int32_t wk = w[k];
        for (std::size_t x = 0; x < mid_stride; ++x) acc[x] += wk * p[x];
      }
      for (std::size_t x = 0; x < mid_stride; ++x) out[x] = clip8(acc[x]);
    }
  }

 private:
  resample_axis h_, v_;
  std::vector<std::uint8_t> mid_;
  std::vector<std::int32_t> acc_;
};

}  // namespace gpufeed::detail::image
