// gpufeed — the Zstandard HDF5 filter (id 32015), its one home: identity, CPU decoder, CPU
// encoder. Each chunk is zstd frame(s) holding the chunk's bytes.
//   Decoder: libzstd, with a context kept per reader.
//   Encoder: one zstd frame with its content size (ZSTD_compressCCtx), which is what the Zstd
//            plugin writes and reads; cd_values {level} (gpufeed pack).
// GPU decoder: none (Zstd chunks are decoded on the CPU).
#pragma once

#include <zstd.h>
#include <zstd_errors.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/codec/encode_failure.hpp"
#include "gpufeed/detail/codec/kind.hpp"
#include "gpufeed/detail/codec/result.hpp"

namespace gpufeed::detail::codec {

inline constexpr identity zstd_codec{kind::zstd, 32015, "zstd"};

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

// Encoder: one frame of `in` at `level` (1-22) into `out`, with a context kept per thread.
inline void zstd_encode(std::span<const std::byte> in, int level, std::vector<std::byte>& out) {
  thread_local std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> ctx(nullptr, ZSTD_freeCCtx);
  if (!ctx) ctx.reset(ZSTD_createCCtx());
  if (!ctx) encode_fail("ZSTD_createCCtx", "out of memory");
  out.resize(ZSTD_compressBound(in.size()));
  const std::size_t n =
      ZSTD_compressCCtx(ctx.get(), out.data(), out.size(), in.data(), in.size(), level);
  if (ZSTD_isError(n)) encode_fail("ZSTD_compressCCtx", ZSTD_getErrorName(n));
  out.resize(n);
}

}  // namespace gpufeed::detail::codec
