// gpufeed::detail::image — PNG through libspng (0.7: SPNG_FMT_RGB8 converts every PNG colour
// type and bit depth to 8-bit RGB; alpha is dropped, as PIL's convert("RGB") drops it).
//
// Contracts: one spng context per call (cheap: libspng allocates per image anyway); every libspng
// failure — a bad signature past the first bytes, a CRC mismatch, a truncated stream — is a
// corrupt_error with libspng's message; chunk sizes and image size are bounded before any
// allocation (the image's against what its bytes can hold).
#pragma once

#include <spng.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "gpufeed/detail/unique_handle.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/image/image_view.hpp"

namespace gpufeed::detail::image {

struct spng_close {
  void operator()(spng_ctx* c) const noexcept { spng_ctx_free(c); }
};
using spng_handle = unique_handle<spng_ctx*, spng_close>;

inline bool is_png(std::span<const std::byte> b) noexcept {
  static constexpr unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (b.size() < 8) return false;
  for (int i = 0; i < 8; ++i)
    if (b[static_cast<std::size_t>(i)] != std::byte{sig[i]}) return false;
  return true;
}

[[noreturn]] inline void spng_fail(int rc, const char* what, const char* api,
                                   error_context where) {
  where.api = api;
  where.status = rc;
  where.status_text = spng_strerror(rc);
  throw corrupt_error(std::string("corrupt PNG: ") + what, std::move(where));
}

inline spng_handle open_png(std::span<const std::byte> bytes, const error_context& where) {
  spng_handle ctx(spng_ctx_new(0));
  if (!ctx.valid()) throw library_error("spng_ctx_new failed", where);
  // 64 MiB per chunk: far beyond any real image's metadata, and a bound on what a hostile
  // length field can make libspng allocate.
  spng_set_chunk_limits(ctx.get(), 64u << 20, 64u << 20);
  if (const int rc = spng_set_png_buffer(ctx.get(), bytes.data(), bytes.size()); rc != 0)
    spng_fail(rc, "cannot read the buffer", "spng_set_png_buffer", where);
  return ctx;
}

// Deflate's largest expansion: a 258-byte match coded in 2 bits.
inline constexpr std::uint64_t deflate_max_ratio = 1032;

// The header's size. corrupt_error before anything is allocated for the image when the size
// its header declares cannot come from `input_bytes` of PNG: its filtered rows (one filter byte
// each, plus the pixels at the declared bit depth; interlaced images hold more) would take more
// than deflate can expand those bytes to.
inline void png_size(spng_ctx* ctx, std::size_t input_bytes, int& width, int& height,
                     const error_context& where) {
  spng_ihdr ihdr{};
  if (const int rc = spng_get_ihdr(ctx, &ihdr); rc != 0)
    spng_fail(rc, "cannot read the header", "spng_get_ihdr", where);
  width = static_cast<int>(ihdr.width);
  height = static_cast<int>(ihdr.height);
  if (width <= 0 || height <= 0) spng_fail(SPNG_EWIDTH, "bad image size", "spng_get_ihdr", where);
  const std::uint64_t samples = ihdr.color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ? 4
                                : ihdr.color_type == SPNG_COLOR_TYPE_TRUECOLOR     ? 3
                                : ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ? 2
                                                                                     : 1;
  const std::uint64_t row_bits = static_cast<std::uint64_t>(ihdr.width) * samples * ihdr.bit_depth;
  const std::uint64_t rows = static_cast<std::uint64_t>(ihdr.height) * (1 + (row_bits + 7) / 8);
  if (rows / deflate_max_ratio > input_bytes) {
    error_context c = where;
    c.api = "spng_get_ihdr";
    throw corrupt_error("corrupt PNG: its header declares " + std::to_string(ihdr.width) + " x " +
                            std::to_string(ihdr.height) + " pixels (" + std::to_string(rows) +
                            " bytes of filtered rows), more than its " +
                            std::to_string(input_bytes) + " bytes can hold",
                        std::move(c));
  }
}

// Decodes the whole image to 8-bit RGB in `out`.
inline void decode_png(spng_ctx* ctx, std::size_t input_bytes, gpufeed::image::rgb_image& out,
                       const error_context& where) {
  int w = 0, h = 0;
  png_size(ctx, input_bytes, w, h, where);
  std::size_t n = 0;
  if (const int rc = spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &n); rc != 0)
    spng_fail(rc, "cannot size the image", "spng_decoded_image_size", where);
  out.reshape(w, h, 3);
  if (n != out.size_bytes())
    spng_fail(SPNG_EOVERFLOW, "unexpected decoded size", "spng_decoded_image_size", where);
  if (const int rc = spng_decode_image(ctx, out.data(), n, SPNG_FMT_RGB8, 0); rc != 0)
    spng_fail(rc, "cannot decode", "spng_decode_image", where);
}

}  // namespace gpufeed::detail::image
