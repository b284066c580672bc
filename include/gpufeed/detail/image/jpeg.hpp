// gpufeed::detail::image — JPEG through libjpeg-turbo's TurboJPEG API (2.1: tjDecompress2).
//
// Contracts:
// - One tjhandle per decoder object; a handle is not shared between threads.
// - Every TurboJPEG failure, warnings included ("Premature end of JPEG file" for a truncated
//   image, "Corrupt JPEG data" for damaged entropy data: libjpeg fills what is missing with grey
//   and goes on; tjDecompress2 then returns -1), is a corrupt_error carrying the caller's context
//   and TurboJPEG's message. TJFLAG_STOPONWARNING stops at the first warning rather than
//   decoding the rest of an image that will be refused.
// - CMYK and YCCK images (Adobe Photoshop writes inverted CMYK) are decoded to CMYK and turned
//   into RGB as libjpeg-turbo's own djpeg/tjSaveImage do: R = round(C * K / 255), etc.
// - Only the power-of-two DCT scales (1/8, 1/4, 1/2, 1) are used: libjpeg-turbo has SIMD inverse
//   DCTs for those; the other M/8 scales run its plain C IDCTs, slower than decoding at full size.
#pragma once

#include <turbojpeg.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "gpufeed/detail/unique_handle.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/image/image_view.hpp"

namespace gpufeed::detail::image {

struct tj_close {
  void operator()(tjhandle h) const noexcept { tjDestroy(h); }
};
using tj_handle = unique_handle<tjhandle, tj_close>;

struct jpeg_header {
  int width = 0, height = 0;
  int subsamp = 0, colorspace = 0;  // TJSAMP_*, TJCS_*
  [[nodiscard]] bool cmyk() const noexcept {
    return colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  }
  [[nodiscard]] int components() const noexcept {
    return colorspace == TJCS_GRAY ? 1 : cmyk() ? 4 : 3;
  }
};

inline bool is_jpeg(std::span<const std::byte> b) noexcept {
  return b.size() >= 3 && b[0] == std::byte{0xFF} && b[1] == std::byte{0xD8} &&
         b[2] == std::byte{0xFF};
}

[[noreturn]] inline void tj_fail(tjhandle h, const char* what, const char* api,
                                 error_context where) {
  where.api = api;
  where.status_text = tjGetErrorStr2(h);
  throw corrupt_error(std::string("corrupt JPEG: ") + what, std::move(where));
}

inline tj_handle make_decompressor() {
  tj_handle h(tjInitDecompress());
  if (!h.valid())
    throw library_error(std::string("tjInitDecompress failed: ") + tjGetErrorStr2(nullptr));
  return h;
}

inline jpeg_header read_jpeg_header(tjhandle h, std::span<const std::byte> bytes,
                                    const error_context& where) {
  jpeg_header hd;
  if (tjDecompressHeader3(h, reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<unsigned long>(bytes.size()), &hd.width, &hd.height,
                          &hd.subsamp, &hd.colorspace) != 0)
    tj_fail(h, "cannot read the header", "tjDecompressHeader3", where);
  if (hd.width <= 0 || hd.height <= 0) tj_fail(h, "zero-sized image", "tjDecompressHeader3", where);
  return hd;
}

// Scaled size of `dim` at num/denom, as TurboJPEG computes it (TJSCALED: rounded up).
constexpr int scaled_dim(int dim, int num, int denom) noexcept {
  return static_cast<int>((static_cast<long long>(dim) * num + denom - 1) / denom);
}

// The smallest power-of-two scale 1/d (d in 1, 2, 4, 8) at which the image is at least
// need_w x need_h; 1 when none is, or when neither is asked for (both 0).
constexpr int scale_denom_for(int width, int height, int need_w, int need_h) noexcept {
  if (need_w <= 0 && need_h <= 0) return 1;
  for (int d = 8; d > 1; d /= 2)
    if (scaled_dim(width, 1, d) >= need_w && scaled_dim(height, 1, d) >= need_h) return d;
  return 1;
}

// In place, CMYK (4 bytes a pixel, as libjpeg returns Adobe's inverted values) to RGB (3),
// rows `pixels` long. floor(c * k / 255 + 0.5) == (2ck + 255) / 510 in integers: the same
// rounding as libjpeg-turbo's cmyk_to_rgb.
inline void cmyk_to_rgb(std::uint8_t* p, std::size_t pixels) noexcept {
  std::uint8_t* out = p;
  for (std::size_t i = 0; i < pixels; ++i, p += 4, out += 3) {
    const unsigned k = p[3];
    const auto c = [k](unsigned v) { return static_cast<std::uint8_t>((2 * v * k + 255) / 510); };
    const std::uint8_t r = c(p[0]), g = c(p[1]), b = c(p[2]);
    out[0] = r;
    out[1] = g;
    out[2] = b;
  }
}

// Decodes at 1/denom into `out` (reshaped to the scaled size, 3 channels).
inline void decode_jpeg(tjhandle h, std::span<const std::byte> bytes, const jpeg_header& hd,
                        int denom, gpufeed::image::rgb_image& out, const error_context& where) {
  const int w = scaled_dim(hd.width, 1, denom), ht = scaled_dim(hd.height, 1, denom);
  const bool cmyk = hd.cmyk();
  out.reshape(w, ht, cmyk ? 4 : 3);  // CMYK: 4 bytes a pixel first, packed to 3 below
  const int flags = TJFLAG_STOPONWARNING;
  if (tjDecompress2(h, reinterpret_cast<const unsigned char*>(bytes.data()),
                    static_cast<unsigned long>(bytes.size()), out.data(), w, 0, ht,
                    cmyk ? TJPF_CMYK : TJPF_RGB, flags) != 0)
    tj_fail(h, "cannot decode", "tjDecompress2", where);
  if (cmyk) {
    cmyk_to_rgb(out.data(), static_cast<std::size_t>(w) * static_cast<std::size_t>(ht));
    out.reshape(w, ht, 3);  // same allocation, now read as RGB
  }
}

}  // namespace gpufeed::detail::image
