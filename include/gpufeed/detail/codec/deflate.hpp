// gpufeed — HDF5's deflate filter (id 1), its one home: identity, CPU decoder, CPU encoder.
// A chunk is one zlib-format stream (header, deflate data, Adler-32).
//   Decoder: libdeflate. libdeflate inflates a whole buffer whose decoded size is known in
//            advance; in HDF5 it always is (the chunk's bytes, plus 4 per fletcher32 applied
//            before deflate), so zlib's streaming inflater is not needed on this path. The
//            Adler-32 is verified.
//   Encoder: zlib's compress2, as HDF5's own deflate filter (gpufeed pack).
// GPU decoder: include/gpufeed/cuda/detail/codec/inflate.hpp (one stream per warp; its units are
// planned by detail/codec/gpu_units.hpp and run by cuda/detail/codec/unit_decode.hpp).
#pragma once

#include <libdeflate.h>
#include <zlib.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/codec/encode_failure.hpp"
#include "gpufeed/detail/codec/kind.hpp"
#include "gpufeed/detail/codec/result.hpp"

namespace gpufeed::detail::codec {

inline constexpr identity deflate_codec{kind::deflate, 1, "deflate"};  // H5Z_FILTER_DEFLATE

// One per reader (a libdeflate decompressor is not shared between threads; it holds ~32 KiB of
// tables, so it is kept between chunks).
class deflate_decoder {
 public:
  // Inflates src into exactly dst.size() bytes; bytes after the stream's end are ignored, as
  // HDF5 ignores them. With `actual`, the stream may hold fewer bytes than dst: their count is
  // stored there (the output of a filter whose decoded size nothing records).
  result decode(std::span<const std::byte> src, std::span<std::byte> dst,
                std::size_t* actual = nullptr) {
    if (!d_) {
      d_.reset(libdeflate_alloc_decompressor());
      if (!d_) return library_failure("libdeflate_alloc_decompressor", "out of memory");
    }
    std::size_t in_used = 0;
    const libdeflate_result rc = libdeflate_zlib_decompress_ex(
        d_.get(), src.data(), src.size(), dst.data(), dst.size(), &in_used, actual);
    switch (rc) {
      case LIBDEFLATE_SUCCESS:
        return {};
      case LIBDEFLATE_SHORT_OUTPUT:
        return failed("libdeflate_zlib_decompress", "the stream holds fewer than the expected " +
                                                        std::to_string(dst.size()) + " bytes");
      case LIBDEFLATE_INSUFFICIENT_SPACE:
        return failed("libdeflate_zlib_decompress",
                      "the stream holds more than the expected " + std::to_string(dst.size()) +
                          " bytes");
      default:
        return failed("libdeflate_zlib_decompress",
                      "corrupt deflate data (bad stream, truncated, or Adler-32 mismatch)");
    }
  }

 private:
  struct free_decompressor {
    void operator()(libdeflate_decompressor* d) const noexcept { libdeflate_free_decompressor(d); }
  };
  std::unique_ptr<libdeflate_decompressor, free_decompressor> d_;
};

// Encoder: one zlib stream of `in` at `level` (1-9) into `out`.
inline void deflate_encode(std::span<const std::byte> in, int level, std::vector<std::byte>& out) {
  uLongf len = ::compressBound(static_cast<uLong>(in.size()));
  out.resize(len);
  const int rc = ::compress2(reinterpret_cast<Bytef*>(out.data()), &len,
                             reinterpret_cast<const Bytef*>(in.data()),
                             static_cast<uLong>(in.size()), level);
  if (rc != Z_OK) encode_fail("compress2", ::zError(rc), rc);
  out.resize(len);
}

}  // namespace gpufeed::detail::codec
