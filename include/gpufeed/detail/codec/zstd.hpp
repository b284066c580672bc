// gpufeed — the Zstandard HDF5 filter (id 32015): each chunk is zstd frame(s) holding the chunk's
// bytes. Decoded by libzstd with a context kept per reader.
#pragma once

#include <zstd.h>
#include <zstd_errors.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "gpufeed/detail/codec/result.hpp"

namespace gpufeed::detail::codec {

class zstd_decoder {
 public:
  // Decodes the frame(s) in src into exactly dst.size() bytes.
  result decode(std::span<const std::byte> src, std::span<std::byte> dst) {
    if (!ctx_) {
      ctx_.reset(ZSTD_createDCtx());
      if (!ctx_) return library_failure("ZSTD_createDCtx", "out of memory");
    }
    const std::size_t n =
        ZSTD_decompressDCtx(ctx_.get(), dst.data(), dst.size(), src.data(), src.size());
    if (ZSTD_isError(n)) {
      if (ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation)
        return library_failure("ZSTD_decompressDCtx", ZSTD_getErrorName(n));
      return failed("ZSTD_decompressDCtx",
                    std::string("corrupt zstd data: ") + ZSTD_getErrorName(n));
    }
    if (n != dst.size())
      return failed("ZSTD_decompressDCtx", "the frame holds " + std::to_string(n) +
                                               " bytes, expected " + std::to_string(dst.size()));
    return {};
  }

 private:
  struct free_ctx {
    void operator()(ZSTD_DCtx* c) const noexcept { ZSTD_freeDCtx(c); }
  };
  std::unique_ptr<ZSTD_DCtx, free_ctx> ctx_;
};

}  // namespace gpufeed::detail::codec
