// gpufeed — CRC-32C (Castagnoli, the polynomial of iSCSI, ext4 and SSE 4.2's crc32 instruction),
// the checksum of the node-local cache's block pages (local_cache_block.hpp).
//
// Why this CRC: every cached read checks the pages it delivers, so the checksum runs over every
// byte a cache hit hands out; x86-64 computes CRC-32C in hardware, and pages, each with its own
// CRC, are checked three at a time (three independent instruction streams keep the unit busy,
// one alone waits on each result). Where SSE 4.2 is missing (checked once, at run time) or on
// other architectures a table computes the same values.
//
// crc32c(0, p, n) is the standard CRC-32C of n bytes ("123456789" gives 0xe3069283);
// crc32c(crc32c(0, a, na), b, nb) that of a followed by b.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define GPUFEED_CRC32C_SSE42 1
#endif

namespace gpufeed::detail::remote {

namespace crc32c_impl {

// Slicing-by-8 tables of the reflected polynomial 0x82f63b78.
inline const std::array<std::array<std::uint32_t, 256>, 8>& tables() noexcept {
  static const auto t = [] {
    std::array<std::array<std::uint32_t, 256>, 8> r{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
      r[0][i] = c;
    }
    for (std::size_t s = 1; s < 8; ++s)
      for (std::size_t i = 0; i < 256; ++i) r[s][i] = (r[s - 1][i] >> 8) ^ r[0][r[s - 1][i] & 0xff];
    return r;
  }();
  return t;
}

// The raw register (not inverted) continued over n bytes, by table.
inline std::uint32_t table_update(std::uint32_t c, const unsigned char* p, std::size_t n) noexcept {
  const auto& t = tables();
  for (; n >= 8; n -= 8, p += 8) {
    std::uint32_t lo = 0, hi = 0;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;  // little-endian byte order (x86-64, aarch64): the table path's only users
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xff];
  return c;
}

#ifdef GPUFEED_CRC32C_SSE42
[[nodiscard]] inline bool has_sse42() noexcept {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}

__attribute__((target("sse4.2"))) inline std::uint32_t hw_update(std::uint32_t c,
                                                                 const unsigned char* p,
                                                                 std::size_t n) noexcept {
  std::uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t v = 0;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
  }
  c = static_cast<std::uint32_t>(c64);
  for (; n > 0; --n, ++p) c = _mm_crc32_u8(c, *p);
  return c;
}

// Three raw registers, each continued over its own n bytes, in one interleaved loop.
__attribute__((target("sse4.2"))) inline void hw_update3(std::uint32_t* c,
                                                         const unsigned char* const* p,
                                                         std::size_t n) noexcept {
  std::uint64_t a = c[0], b = c[1], d = c[2];
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t va = 0, vb = 0, vd = 0;
    std::memcpy(&va, p[0] + i, 8);
    std::memcpy(&vb, p[1] + i, 8);
    std::memcpy(&vd, p[2] + i, 8);
    a = _mm_crc32_u64(a, va);
    b = _mm_crc32_u64(b, vb);
    d = _mm_crc32_u64(d, vd);
  }
  c[0] = hw_update(static_cast<std::uint32_t>(a), p[0] + i, n - i);
  c[1] = hw_update(static_cast<std::uint32_t>(b), p[1] + i, n - i);
  c[2] = hw_update(static_cast<std::uint32_t>(d), p[2] + i, n - i);
}
#endif

inline std::uint32_t update(std::uint32_t c, const unsigned char* p, std::size_t n) noexcept {
#ifdef GPUFEED_CRC32C_SSE42
  if (has_sse42()) return hw_update(c, p, n);
#endif
  return table_update(c, p, n);
}

}  // namespace crc32c_impl

// The CRC-32C of n bytes at p continuing `crc` (0 to start).
[[nodiscard]] inline std::uint32_t crc32c(std::uint32_t crc, const void* p, std::size_t n) noexcept {
  return ~crc32c_impl::update(~crc, static_cast<const unsigned char*>(p), n);
}

// The same by table, whatever the processor has (tests compare the two paths).
[[nodiscard]] inline std::uint32_t crc32c_portable(std::uint32_t crc, const void* p,
                                                   std::size_t n) noexcept {
  return ~crc32c_impl::table_update(~crc, static_cast<const unsigned char*>(p), n);
}

// out[k] = crc32c(0, page[k], bytes[k]) for `count` buffers, three at a time where three in a
// row have the same length.
inline void crc32c_each(const std::byte* const* page, const std::size_t* bytes, std::size_t count,
                        std::uint32_t* out) noexcept {
  std::size_t k = 0;
#ifdef GPUFEED_CRC32C_SSE42
  if (crc32c_impl::has_sse42())
    while (k + 3 <= count) {
      if (bytes[k] != bytes[k + 1] || bytes[k] != bytes[k + 2]) {
        out[k] = crc32c(0, page[k], bytes[k]);
        ++k;
        continue;
      }
      std::uint32_t c[3] = {~0u, ~0u, ~0u};
      const unsigned char* q[3] = {reinterpret_cast<const unsigned char*>(page[k]),
                                   reinterpret_cast<const unsigned char*>(page[k + 1]),
                                   reinterpret_cast<const unsigned char*>(page[k + 2])};
      crc32c_impl::hw_update3(c, q, bytes[k]);
      for (std::size_t j = 0; j < 3; ++j) out[k + j] = ~c[j];
      k += 3;
    }
#endif
  for (; k < count; ++k) out[k] = crc32c(0, page[k], bytes[k]);
}

// out[k] = crc32c(0, ...) of page k of `count` pages of page_bytes each, laid end to end at p.
inline void crc32c_pages(const void* p, std::size_t page_bytes, std::size_t count,
                         std::uint32_t* out) noexcept {
  const auto* b = static_cast<const std::byte*>(p);
  constexpr std::size_t batch = 48;
  const std::byte* page[batch];
  std::size_t bytes[batch];
  for (std::size_t k = 0; k < count; k += batch) {
    const std::size_t n = std::min(batch, count - k);
    for (std::size_t j = 0; j < n; ++j) {
      page[j] = b + (k + j) * page_bytes;
      bytes[j] = page_bytes;
    }
    crc32c_each(page, bytes, n, out + k);
  }
}

}  // namespace gpufeed::detail::remote
