// gpufeed::detail::codec — how a codec's encoder (gpufeed pack's, in the codec files) fails: a
// library_error "cannot compress a chunk" naming the codec library's call, and the big-endian
// field writes the plugin formats' headers use (read_be32/64 in result.hpp read them back).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "gpufeed/error.hpp"

namespace gpufeed::detail::codec {

[[noreturn]] inline void encode_fail(const char* api, const std::string& what, int status = 0) {
  error_context ctx;
  ctx.api = api;
  ctx.status = status;
  ctx.status_text = what;
  throw library_error("cannot compress a chunk", std::move(ctx));
}

inline void put_be32(std::byte* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>((v >> (24 - 8 * i)) & 0xff);
}
inline void put_be64(std::byte* p, std::uint64_t v) noexcept {
  put_be32(p, static_cast<std::uint32_t>(v >> 32));
  put_be32(p + 4, static_cast<std::uint32_t>(v));
}

}  // namespace gpufeed::detail::codec
