// gpufeed — what every chunk decoder returns, and the big-endian field reads their formats use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace gpufeed::detail::codec {

// ok, or why not. `library_failed` is set when the codec library itself failed (out of memory,
// a context it could not create), not the data: the caller reports that as a library error, and
// everything else as corrupt data.
struct result {
  bool ok = true;
  bool library_failed = false;
  std::string message;
  const char* api = "";
};

inline result failed(const char* api, std::string message) {
  return result{false, false, std::move(message), api};
}
inline result library_failure(const char* api, std::string message) {
  return result{false, true, std::move(message), api};
}

inline std::uint32_t read_be32(const std::byte* p) noexcept {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
         std::uint32_t{b[3]};
}
inline std::uint64_t read_be64(const std::byte* p) noexcept {
  return (std::uint64_t{read_be32(p)} << 32) | read_be32(p + 4);
}

}  // namespace gpufeed::detail::codec
