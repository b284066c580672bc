// gpufeed::image — image_decoder: JPEG (libjpeg-turbo's TurboJPEG) and PNG (libspng) bytes to
// 8-bit RGB, HWC (see image_view.hpp).
//
//   gpufeed::image::image_decoder dec;                 // one per thread: not thread-safe
//   gpufeed::image::rgb_image px;                      // reused: no allocation once warm
//   auto hd = dec.header(bytes, where);                // width x height, no pixel decoded
//   dec.decode(bytes, px, where);                      // full size
//   dec.decode(bytes, px, where, 224, 224);            // JPEG: at the smallest DCT scale
//                                                      // (1/8, 1/4, 1/2) still >= 224 x 224
//
// Contracts:
// - The format is told by the first bytes (JPEG SOI marker, PNG signature). Anything else is a
//   format_error ("not a JPEG or PNG image"): the record is not an image at all.
// - A JPEG or PNG that fails to decode — truncated, damaged entropy data, bad CRC, a header that
//   lies — is a corrupt_error carrying `where` (pass the shard as file and the record) and the
//   library's message. A warning from libjpeg is a failure, not a grey-filled image.
// - Grayscale becomes R = G = B; CMYK/YCCK JPEGs are converted as libjpeg-turbo's djpeg does;
//   progressive JPEGs decode like baseline ones; PNG alpha is dropped.
// - A call that fails leaves the decoder as good as new: libjpeg keeps a handle inside the
//   stream it refused (a 12-bit or lossless frame, a zero or over-65,500 side) and would fail
//   every later image on it ("two SOI markers"), so the TurboJPEG handle is destroyed on any
//   error and made again by the next call.
// - An image over options.max_pixels (default PIL's decompression-bomb limit, 2 x 89,478,485)
//   is an unsupported_error before anything is allocated for it. A PNG whose header declares
//   more pixel rows than its bytes can inflate to (deflate expands at most 1032-fold) is a
//   corrupt_error, also before any allocation.
// - DCT scaling (JPEG only) gives exactly what `djpeg -scale 1/d` gives for the same file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <string>

#include "gpufeed/detail/image/jpeg.hpp"
#include "gpufeed/detail/image/png.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/image/image_view.hpp"

namespace gpufeed::image {

enum class image_format { jpeg, png };

struct image_header {
  image_format format = image_format::jpeg;
  int width = 0, height = 0;
  int components = 3;  // in the file: 1 gray, 3 colour, 4 CMYK (PNG: 3 whatever its type)
};

struct decoder_options {
  std::uint64_t max_pixels = 178956970;
};

// What decode() did: the size it decoded at, and the JPEG DCT scale 1/scale_denom (1 for PNG).
struct decoded {
  image_header header;
  int scale_denom = 1;
};

class image_decoder {
 public:
  explicit image_decoder(decoder_options options = {})
      : options_(options), tj_(detail::image::make_decompressor()) {}

  // The image's format and full size, from its header only.
  [[nodiscard]] image_header header(std::span<const std::byte> bytes,
                                    const error_context& where = {}) {
    const fresh_after_failure guard(*this);
    image_header h;
    if (detail::image::is_jpeg(bytes)) {
      const auto jh = detail::image::read_jpeg_header(tj(), bytes, where);
      h = {image_format::jpeg, jh.width, jh.height, jh.components()};
    } else if (detail::image::is_png(bytes)) {
      auto ctx = detail::image::open_png(bytes, where);
      h.format = image_format::png;
      detail::image::png_size(ctx.get(), bytes.size(), h.width, h.height, where);
    } else {
      throw format_error("not a JPEG or PNG image (" + std::to_string(bytes.size()) + " bytes)",
                         where);
    }
    check_size(h, where);
    return h;
  }

  // Decodes to RGB in `out`. With min_width/min_height > 0, a JPEG is decoded at the smallest
  // power-of-two DCT scale whose result is still at least that large (full size when none is);
  // returns the header and the scale used.
  decoded decode(std::span<const std::byte> bytes, rgb_image& out, const error_context& where = {},
                 int min_width = 0, int min_height = 0) {
    const fresh_after_failure guard(*this);
    decoded d;
    if (detail::image::is_jpeg(bytes)) {
      const auto jh = detail::image::read_jpeg_header(tj(), bytes, where);
      d.header = {image_format::jpeg, jh.width, jh.height, jh.components()};
      check_size(d.header, where);
      d.scale_denom = detail::image::scale_denom_for(jh.width, jh.height, min_width, min_height);
      detail::image::decode_jpeg(tj(), bytes, jh, d.scale_denom, out, where);
    } else if (detail::image::is_png(bytes)) {
      auto ctx = detail::image::open_png(bytes, where);
      d.header.format = image_format::png;
      detail::image::png_size(ctx.get(), bytes.size(), d.header.width, d.header.height, where);
      check_size(d.header, where);
      detail::image::decode_png(ctx.get(), bytes.size(), out, where);
    } else {
      (void)header(bytes, where);  // throws the format_error
    }
    return d;
  }

  // Decodes a JPEG at exactly 1/scale_denom (1, 2, 4 or 8): what `djpeg -scale 1/d` writes.
  image_header decode_jpeg_scaled(std::span<const std::byte> bytes, int scale_denom,
                                  rgb_image& out, const error_context& where = {}) {
    if (scale_denom != 1 && scale_denom != 2 && scale_denom != 4 && scale_denom != 8)
      throw config_error("JPEG scale 1/" + std::to_string(scale_denom) +
                         " is not one of 1, 1/2, 1/4, 1/8", where);
    if (!detail::image::is_jpeg(bytes)) (void)header(bytes, where);
    const fresh_after_failure guard(*this);
    const auto jh = detail::image::read_jpeg_header(tj(), bytes, where);
    image_header h{image_format::jpeg, jh.width, jh.height, jh.components()};
    check_size(h, where);
    detail::image::decode_jpeg(tj(), bytes, jh, scale_denom, out, where);
    return h;
  }

  [[nodiscard]] const decoder_options& options() const noexcept { return options_; }

 private:
  // Destroys the TurboJPEG handle when the scope it guards is left by an exception.
  class fresh_after_failure {
   public:
    explicit fresh_after_failure(image_decoder& d) noexcept : d_(d) {}
    fresh_after_failure(const fresh_after_failure&) = delete;
    fresh_after_failure& operator=(const fresh_after_failure&) = delete;
    ~fresh_after_failure() {
      if (std::uncaught_exceptions() > unwinding_) d_.tj_.reset();
    }

   private:
    image_decoder& d_;
    int unwinding_ = std::uncaught_exceptions();
  };

  // The handle, made again after a failure destroyed it (library_error when that fails).
  tjhandle tj() {
    if (!tj_.valid()) tj_ = detail::image::make_decompressor();
    return tj_.get();
  }

  void check_size(const image_header& h, const error_context& where) const {
    const auto px = static_cast<std::uint64_t>(h.width) * static_cast<std::uint64_t>(h.height);
    if (px > options_.max_pixels)
      throw unsupported_error("image of " + std::to_string(h.width) + " x " +
                                  std::to_string(h.height) + " pixels exceeds max_pixels (" +
                                  std::to_string(options_.max_pixels) + ")",
                              where);
  }

  decoder_options options_;
  detail::image::tj_handle tj_;
};

}  // namespace gpufeed::image
