// gpufeed::image — geometric augmentations on decoded pixels (image_view.hpp's layout):
// torchvision's RandomResizedCrop and CenterCrop boxes, a bilinear resize of a box to a fixed
// size, and a horizontal flip.
//
//   std::mt19937_64 g(seed);
//   auto box = gpufeed::image::random_resized_crop_box(w, h, g);     // in w x h pixels
//   gpufeed::image::resize_box(src, box, dst);                        // dst: 224 x 224
//   if (gpufeed::image::coin(g)) gpufeed::image::flip_horizontal(dst);
//
// Contracts:
// - random_resized_crop_box follows torchvision.transforms.RandomResizedCrop.get_params: up to
//   `attempts` (10) draws of area ~ U(scale) * w * h and log aspect ~ U(log ratio), sizes rounded
//   half to even as Python's round(); the first that fits is placed uniformly; else the centre
//   crop of the largest box within the ratio range. Always 0 < width <= w, 0 < height <= h,
//   inside the image. The draws come from the generator in a fixed order (see detail/random.hpp),
//   so the same generator state gives the same box everywhere.
// - center_crop_box is torchvision's CenterCrop: offsets round((w - cw) / 2); a crop larger than
//   the image is clamped to it (torchvision pads instead; gpufeed never invents pixels).
// - resize_box is PIL's BILINEAR resize (torchvision's default for PIL images): a triangle filter
//   that widens its support when shrinking (antialiasing), edges renormalised, 8-bit fixed-point
//   weights; written in gpufeed (detail/image/resample.hpp says why no library's). The box may be
//   fractional (a box of the full image mapped onto a DCT-scaled decode).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "gpufeed/detail/image/random.hpp"
#include "gpufeed/detail/image/resample.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/image/image_view.hpp"

namespace gpufeed::image {

// A box of pixels: columns [x, x + width), rows [y, y + height).
struct crop_box {
  double x = 0, y = 0, width = 0, height = 0;
  friend bool operator==(const crop_box&, const crop_box&) = default;
};

struct random_resized_crop_options {
  double scale_min = 0.08, scale_max = 1.0;       // of the image's area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // width / height
  int attempts = 10;
};

template <class G>
crop_box random_resized_crop_box(int width, int height, G& g,
                                 const random_resized_crop_options& o = {}) {
  if (width <= 0 || height <= 0) throw config_error("random_resized_crop_box of an empty image");
  using detail::image::py_round;
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(o.ratio_min), log_hi = std::log(o.ratio_max);
  for (int a = 0; a < o.attempts; ++a) {
    const double target = area * detail::image::uniform(g, o.scale_min, o.scale_max);
    const double aspect = std::exp(detail::image::uniform(g, log_lo, log_hi));
    const long long w = py_round(std::sqrt(target * aspect));
    const long long h = py_round(std::sqrt(target / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const auto i = detail::image::below(g, static_cast<std::uint64_t>(height - h + 1));
      const auto j = detail::image::below(g, static_cast<std::uint64_t>(width - w + 1));
      return {static_cast<double>(j), static_cast<double>(i), static_cast<double>(w),
              static_cast<double>(h)};
    }
  }
  // Fallback: the centre crop of the whole image trimmed to the ratio range.
  const double in_ratio = static_cast<double>(width) / height;
  long long w = width, h = height;
  if (in_ratio < o.ratio_min) {
    h = std::min<long long>(height, py_round(static_cast<double>(w) / o.ratio_min));
  } else if (in_ratio > o.ratio_max) {
    w = std::min<long long>(width, py_round(static_cast<double>(h) * o.ratio_max));
  }
  return {static_cast<double>((width - w) / 2), static_cast<double>((height - h) / 2),
          static_cast<double>(w), static_cast<double>(h)};
}

// True with probability 1/2 (RandomHorizontalFlip's p = 0.5), from one draw of g.
template <class G>
bool coin(G& g) {
  return detail::image::uniform01(g) < 0.5;
}

// torchvision CenterCrop((crop_height, crop_width)) of a width x height image.
inline crop_box center_crop_box(int width, int height, int crop_width, int crop_height) {
  const int cw = std::min(crop_width, width), ch = std::min(crop_height, height);
  using detail::image::py_round;
  return {static_cast<double>(py_round((width - cw) / 2.0)),
          static_cast<double>(py_round((height - ch) / 2.0)), static_cast<double>(cw),
          static_cast<double>(ch)};
}

// The evaluation crop torchvision writes as Resize(resize) then CenterCrop(crop), as a box of
// the original image: the shorter side scaled to `resize`, the longer by int(resize * long /
// short), then the centre crop x crop of that, mapped back. Resizing the box to crop x crop
// gives the same picture without the intermediate image.
inline crop_box resize_center_crop_box(int width, int height, int resize, int crop) {
  if (width <= 0 || height <= 0 || resize <= 0 || crop <= 0)
    throw config_error("resize_center_crop_box: sizes must be positive");
  const bool wide = width >= height;
  const int short_side = wide ? height : width, long_side = wide ? width : height;
  const int rlong = static_cast<int>(static_cast<long long>(resize) * long_side / short_side);
  const int rw = wide ? rlong : resize, rh = wide ? resize : rlong;
  const crop_box c = center_crop_box(rw, rh, crop, crop);
  const double sx = static_cast<double>(width) / rw, sy = static_cast<double>(height) / rh;
  return {c.x * sx, c.y * sy, c.width * sx, c.height * sy};
}

// A box scaled by (sx, sy): a box of the full image mapped onto a decode at 1/d (sx = sy = 1/d,
// or the exact scaled-size ratios).
inline crop_box scale_box(const crop_box& b, double sx, double sy) {
  return {b.x * sx, b.y * sy, b.width * sx, b.height * sy};
}

// Keeps resize_box's coefficient tables and intermediate rows between calls: one per thread
// resizes without allocating once warm.
using resampler = detail::image::resampler;

// Resamples box `b` of src into all of dst (same channel count). Throws config_error for a box
// outside src or a channel mismatch.
inline void resize_box(const image_view& src, const crop_box& b, const image_view& dst,
                       resampler& r) {
  if (src.channels != dst.channels || src.channels < 1 || src.channels > 4)
    throw config_error("resize_box: source and destination channel counts differ");
  const double eps = 1e-6;
  if (b.width <= 0 || b.height <= 0 || b.x < -eps || b.y < -eps ||
      b.x + b.width > src.width + eps || b.y + b.height > src.height + eps || dst.width <= 0 ||
      dst.height <= 0)
    throw config_error("resize_box: the box is not inside the source image");
  r.run(src, b.x, b.y, b.width, b.height, dst);
}

inline void resize_box(const image_view& src, const crop_box& b, const image_view& dst) {
  resampler r;
  resize_box(src, b, dst, r);
}

// Mirrors every row in place.
inline void flip_horizontal(const image_view& v) noexcept {
  const int c = v.channels;
  for (int y = 0; y < v.height; ++y) {
    std::uint8_t* l = v.row(y);
    std::uint8_t* r = l + static_cast<std::size_t>(v.width - 1) * static_cast<std::size_t>(c);
    for (; l < r; l += c, r -= c)
      for (int k = 0; k < c; ++k) std::swap(l[k], r[k]);
  }
}

}  // namespace gpufeed::image
