// gpufeed::detail::image::nvjpeg — the host half of a batched GPU JPEG decode: each JPEG's header
// read with nvjpegGetImageInfo, its size bounded before anything is allocated for it, and a
// route chosen — the batched GPU decode, the CPU decoder (TurboJPEG), or failed with the typed
// error the CPU decoder would have raised. Host-only; cuda/jpeg_decode.cuh does the rest.
//
// Routes (plan_batch):
// - failed: nvjpegGetImageInfo says the bytes are not a JPEG or end early (corrupt_error, as
//   nvjpeg_check.hpp maps the status), a size of 0, or more than max_pixels pixels
//   (unsupported_error, the CPU decoder's words). Nothing is decoded for it.
// - cpu: not a JPEG (no SOI marker: a PNG, or bytes the CPU decoder names a format_error; its
//   size is then 0 here, read by the CPU decoder), or valid but not for this GPU decode: 2 or 4 components (CMYK), a subsampling the batched
//   decoder does not take (4:1:1, 4:1:0, unknown), a status of NVJPEG_STATUS_JPEG_NOT_SUPPORTED
//   from the header read (TurboJPEG may still decode it, or raises its own error), or — on the
//   hardware backend — nvjpegDecodeBatchedSupported's "no" (progressive, 12-bit, other
//   subsamplings the engines do not take), or no EOI marker near its end (cut short: nvJPEG's
//   hardware engines decode what is there without an error, TurboJPEG reports "Premature end of
//   JPEG file" as a corrupt_error). `why` says which.
// - gpu: everything else.
// Every error names the JPEG's shard and record (the caller's `where`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/image/nvjpeg_api.hpp"
#include "gpufeed/detail/image/nvjpeg_check.hpp"
#include "gpufeed/detail/image/nvjpeg_library.hpp"
#include "gpufeed/detail/unique_handle.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::image::nvjpeg {

// One JPEG of a batch: its bytes (pinned memory for the GPU route) and where it came from.
struct batch_item {
  std::span<const std::byte> bytes;
  error_context where;  // shard (file) and record
};

enum class route : std::uint8_t { gpu, cpu, failed };

struct planned_image {
  route to = route::failed;
  int width = 0, height = 0, components = 0;
  chroma_subsampling subsampling = chroma_subsampling::unknown;
  std::string why;             // route cpu: why not the GPU
  std::exception_ptr error;    // route failed: the typed error
};

struct plan_limits {
  std::uint64_t max_pixels = 178956970;  // decoder_options' default: width * height bound
  bool hardware = false;                 // ask nvjpegDecodeBatchedSupported (hardware backend)
};

struct jpeg_stream_close {
  status (*destroy)(jpeg_stream_t) = nullptr;
  void operator()(jpeg_stream_t s) const noexcept {
    if (destroy) log_failure(destroy(s), "nvjpegJpegStreamDestroy");
  }
};
using jpeg_stream = unique_handle<jpeg_stream_t, jpeg_stream_close>;

inline jpeg_stream create_jpeg_stream(const library& lib, handle_t h) {
  jpeg_stream_t s = nullptr;
  check(lib.ok() ? lib.api().jpeg_stream_create(h, &s) : status::not_initialized,
        "nvjpegJpegStreamCreate");
  return jpeg_stream(s, jpeg_stream_close{lib.api().jpeg_stream_destroy});
}

// True when the batched decoder takes this subsampling (the colour ones it documents, and gray).
constexpr bool batched_subsampling(chroma_subsampling c) noexcept {
  switch (c) {
    case chroma_subsampling::css_444:
    case chroma_subsampling::css_422:
    case chroma_subsampling::css_420:
    case chroma_subsampling::css_440:
    case chroma_subsampling::css_gray:
      return true;
    default:
      return false;
  }
}

// Whether the JPEG's last marker, within its last 4 KiB (trailing bytes after EOI are allowed),
// is EOI (FF D9). In entropy-coded data an FF byte is followed only by 00 or a restart marker, so
// FF D9 there is the end of the image.
inline bool ends_with_eoi(std::span<const std::byte> b) noexcept {
  const std::size_t n = b.size(), stop = n > 4096 ? n - 4096 : 0;
  for (std::size_t i = n; i >= stop + 2; --i)
    if (b[i - 2] == std::byte{0xFF} && b[i - 1] == std::byte{0xD9}) return true;
  return false;
}

// The route of one JPEG. `stream` is a parse target for the hardware check (reused per call).
inline planned_image plan_one(const library& lib, handle_t h, const batch_item& item,
                              const plan_limits& limits, jpeg_stream_t stream) {
  planned_image p;
  try {
    int comps = 0, widths[max_component] = {}, heights[max_component] = {};
    chroma_subsampling css = chroma_subsampling::unknown;
    const auto* data = reinterpret_cast<const unsigned char*>(item.bytes.data());
    if (item.bytes.size() < 2 || data[0] != 0xFF || data[1] != 0xD8) {
      p.to = route::cpu;
      p.why = "not a JPEG";
      return p;
    }
    const status s = lib.api().get_image_info(h, data, item.bytes.size(), &comps, &css, widths, heights);
    if (s == status::jpeg_not_supported) {
      p.to = route::cpu;
      p.why = "nvjpegGetImageInfo: NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
      return p;
    }
    check_decode(s, "nvjpegGetImageInfo", item.where);
    p.width = widths[0];
    p.height = heights[0];
    p.components = comps;
    p.subsampling = css;
    if (p.width <= 0 || p.height <= 0)
      throw corrupt_error("corrupt JPEG: its header gives a size of " + std::to_string(p.width) +
                              " x " + std::to_string(p.height),
                          item.where);
    const auto px = static_cast<std::uint64_t>(p.width) * static_cast<std::uint64_t>(p.height);
    if (px > limits.max_pixels)
      throw unsupported_error("image of " + std::to_string(p.width) + " x " +
                                  std::to_string(p.height) + " pixels exceeds max_pixels (" +
                                  std::to_string(limits.max_pixels) + ")",
                              item.where);
    if (comps != 1 && comps != 3) {
      p.to = route::cpu;
      p.why = std::to_string(comps) + " components";
      return p;
    }
    if (!batched_subsampling(css)) {
      p.to = route::cpu;
      p.why = "chroma subsampling " + std::to_string(static_cast<int>(css));
      return p;
    }
    if (limits.hardware) {
      check_decode(lib.api().jpeg_stream_parse(h, data, item.bytes.size(), 0, 0, stream),
                   "nvjpegJpegStreamParse", item.where);
      int unsupported = 1;
      check(lib.api().decode_batched_supported(h, stream, &unsupported),
            "nvjpegDecodeBatchedSupported", item.where);
      if (unsupported != 0) {
        p.to = route::cpu;
        p.why = "the hardware decoder does not take it (nvjpegDecodeBatchedSupported)";
        return p;
      }
    }
    if (!ends_with_eoi(item.bytes)) {
      p.to = route::cpu;
      p.why = "no EOI marker at its end (cut short)";
      return p;
    }
    p.to = route::gpu;
  } catch (const library_error&) {
    throw;  // the library failed, not the record: no route can be chosen
  } catch (const error&) {
    p.to = route::failed;
    p.error = std::current_exception();
  }
  return p;
}

// Routes of a whole batch, in order, on this thread (jpeg_batch_decoder runs plan_one on its
// host threads instead). Throws library_error when nvJPEG itself fails.
inline std::vector<planned_image> plan_batch(const library& lib, handle_t h,
                                             std::span<const batch_item> items,
                                             const plan_limits& limits) {
  std::vector<planned_image> out;
  out.reserve(items.size());
  jpeg_stream stream;
  if (limits.hardware) stream = create_jpeg_stream(lib, h);
  for (const batch_item& it : items) out.push_back(plan_one(lib, h, it, limits, stream.get()));
  return out;
}

// Bytes of the interleaved RGB decode of an image the plan routes to a decoder (gpu or cpu).
inline std::size_t decoded_bytes(const planned_image& p) noexcept {
  return p.to == route::failed ? 0
                               : static_cast<std::size_t>(p.width) *
                                     static_cast<std::size_t>(p.height) * 3;
}

}  // namespace gpufeed::detail::image::nvjpeg
