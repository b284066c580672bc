// gpufeed::image — decode + crop in one call, the CPU half of an ImageNet-style input pipeline:
//
//   train_crop  torchvision's RandomResizedCrop(size) + RandomHorizontalFlip() of a JPEG/PNG
//   eval_crop   Resize(resize) + CenterCrop(size)
//
// each writing size x size x 3 uint8 RGB (HWC, or CHW planes with layout = chw) into caller memory — a record's place in a loader
// slot — for cuda::normalizer to turn into float/half CHW on the GPU.
//
//   gpufeed::image::train_crop crop({.size = 224});        // one per worker thread
//   crop(bytes, generator, out, where);                    // out: 224 * 224 * 3 bytes
//
// Contracts:
// - The crop box is drawn on the image's full size (torchvision semantics, augment.hpp), then
//   one draw decides the flip (when options.flip): the same generator state gives the same
//   output whatever thread runs it.
// - A JPEG is decoded at the smallest DCT scale (1/2, 1/4, 1/8) at which the box is still at
//   least size x size pixels, and the box is mapped onto that decode: the resize then always
//   shrinks (or keeps) and never upsamples a decode made smaller than it needed to be. The
//   pixels differ slightly from a full-size decode + resize (the IDCT does part of the
//   shrinking); options.dct_scaling = false decodes at full size.
// - Errors are image_decoder's (corrupt_error, format_error, unsupported_error) with `where`.
// - Not thread-safe: each instance keeps a decoder and a scratch image (no allocation per image
//   once the scratch has grown to the largest decode).
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <string>

#include "gpufeed/error.hpp"
#include "gpufeed/image/augment.hpp"
#include "gpufeed/image/decoder.hpp"
#include "gpufeed/image/image_view.hpp"

namespace gpufeed::image {

// How the output's pixels are laid out: interleaved (HWC, what decoders write) or planar (CHW,
// what cuda::normalizer turns into planar floats for a CHW model input).
enum class pixel_layout { hwc, chw };

struct train_crop_options {
  int size = 224;                        // output is size x size x 3
  pixel_layout layout = pixel_layout::hwc;
  random_resized_crop_options crop{};
  bool flip = true;                      // horizontal flip with probability 1/2
  bool dct_scaling = true;
  decoder_options decoder{};
};

struct eval_crop_options {
  int resize = 256, size = 224;
  pixel_layout layout = pixel_layout::hwc;
  bool dct_scaling = true;
  decoder_options decoder{};
};

namespace detail_crop {
// Decodes `bytes` at the smallest scale that keeps `box` (in full-size pixels) at least
// `size` x `size`, resamples the box into `out` (size x size x 3).
inline void decode_box(image_decoder& dec, rgb_image& scratch, resampler& rs,
                       std::span<const std::byte> bytes,
                       const image_header& h, crop_box box, int size, bool dct_scaling,
                       const image_view& dst, const error_context& where) {
  int need_w = 0, need_h = 0;
  if (dct_scaling && h.format == image_format::jpeg) {
    // Decoded width W' must give box.width * W' / W >= size.
    need_w = static_cast<int>(std::ceil(static_cast<double>(size) * h.width / box.width));
    need_h = static_cast<int>(std::ceil(static_cast<double>(size) * h.height / box.height));
  }
  dec.decode(bytes, scratch, where, need_w, need_h);
  const double sx = static_cast<double>(scratch.width()) / h.width;
  const double sy = static_cast<double>(scratch.height()) / h.height;
  box = scale_box(box, sx, sy);
  resize_box(scratch.view(), box, dst, rs);
}

// Where the resize writes: straight into `out` (HWC), or into `hwc` to be made planar.
inline image_view target(pixel_layout layout, std::span<std::byte> out, rgb_image& hwc, int size) {
  if (layout == pixel_layout::chw) {
    hwc.reshape(size, size, 3);
    return hwc.view();
  }
  return {reinterpret_cast<std::uint8_t*>(out.data()), size, size, 3,
          static_cast<std::size_t>(size) * 3};
}

// HWC `v` to three planes in `out`.
inline void to_planar(const image_view& v, std::span<std::byte> out) noexcept {
  const std::size_t plane = static_cast<std::size_t>(v.width) * static_cast<std::size_t>(v.height);
  auto* o = reinterpret_cast<std::uint8_t*>(out.data());
  for (int y = 0; y < v.height; ++y) {
    const std::uint8_t* p = v.row(y);
    const std::size_t at = static_cast<std::size_t>(y) * static_cast<std::size_t>(v.width);
    for (int x = 0; x < v.width; ++x, p += 3) {
      o[at + static_cast<std::size_t>(x)] = p[0];
      o[plane + at + static_cast<std::size_t>(x)] = p[1];
      o[2 * plane + at + static_cast<std::size_t>(x)] = p[2];
    }
  }
}

inline void check_out(std::span<std::byte> out, int size, const error_context& where) {
  const auto need = static_cast<std::size_t>(size) * static_cast<std::size_t>(size) * 3;
  if (size <= 0 || out.size() < need)
    throw config_error("image crop output of " + std::to_string(out.size()) +
                           " bytes is smaller than " + std::to_string(size) + " x " +
                           std::to_string(size) + " x 3",
                       where);
}
}  // namespace detail_crop

class train_crop {
 public:
  explicit train_crop(train_crop_options o = {}) : o_(o), dec_(o.decoder) {}

  // Writes the size x size x 3 crop of the image in `bytes` to out[0, size * size * 3).
  template <class G>
  void operator()(std::span<const std::byte> bytes, G& g, std::span<std::byte> out,
                  const error_context& where = {}) {
    detail_crop::check_out(out, o_.size, where);
    const image_header h = dec_.header(bytes, where);
    const crop_box box = random_resized_crop_box(h.width, h.height, g, o_.crop);
    const bool flip = o_.flip && coin(g);
    const image_view dst = detail_crop::target(o_.layout, out, hwc_, o_.size);
    detail_crop::decode_box(dec_, scratch_, rs_, bytes, h, box, o_.size, o_.dct_scaling, dst, where);
    if (flip) flip_horizontal(dst);
    if (o_.layout == pixel_layout::chw) detail_crop::to_planar(dst, out);
  }

  [[nodiscard]] const train_crop_options& options() const noexcept { return o_; }
  [[nodiscard]] std::size_t output_bytes() const noexcept {
    return static_cast<std::size_t>(o_.size) * static_cast<std::size_t>(o_.size) * 3;
  }

 private:
  train_crop_options o_;
  image_decoder dec_;
  rgb_image scratch_, hwc_;
  resampler rs_;
};

class eval_crop {
 public:
  explicit eval_crop(eval_crop_options o = {}) : o_(o), dec_(o.decoder) {}

  void operator()(std::span<const std::byte> bytes, std::span<std::byte> out,
                  const error_context& where = {}) {
    detail_crop::check_out(out, o_.size, where);
    const image_header h = dec_.header(bytes, where);
    const crop_box box = resize_center_crop_box(h.width, h.height, o_.resize, o_.size);
    const image_view dst = detail_crop::target(o_.layout, out, hwc_, o_.size);
    detail_crop::decode_box(dec_, scratch_, rs_, bytes, h, box, o_.size, o_.dct_scaling, dst, where);
    if (o_.layout == pixel_layout::chw) detail_crop::to_planar(dst, out);
  }

  [[nodiscard]] const eval_crop_options& options() const noexcept { return o_; }
  [[nodiscard]] std::size_t output_bytes() const noexcept {
    return static_cast<std::size_t>(o_.size) * static_cast<std::size_t>(o_.size) * 3;
  }

 private:
  eval_crop_options o_;
  image_decoder dec_;
  rgb_image scratch_, hwc_;
  resampler rs_;
};

}  // namespace gpufeed::image
