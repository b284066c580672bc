// gpufeed — the size-preserving HDF5 filters gpufeed undoes itself, outside HDF5's global lock:
// shuffle and fletcher32, plus the byte swap for non-native byte order. Each function states the
// exact on-disk format it undoes (HDF5's H5Zshuffle.c, H5Zfletcher32.c). The compressing filters
// (deflate and the plugin codecs) are in chunk_decoders.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gpufeed/detail/hdf5/unshuffle.hpp"  // shuffle, the other size-preserving filter

namespace gpufeed::detail::hdf5 {

// HDF5's Fletcher-32 (H5_checksum_fletcher32): 16-bit words read big-endian, sums started at 0,
// an odd final byte taken as the high byte of a word.
inline std::uint32_t fletcher32(const std::byte* data, std::size_t n) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  std::size_t words = n / 2;
  std::uint32_t sum1 = 0, sum2 = 0;
  while (words) {
    std::size_t block = words > 360 ? 360 : words;  // the most sums without overflow
    words -= block;
    do {
      sum1 += (static_cast<std::uint32_t>(p[0]) << 8) | p[1];
      p += 2;
      sum2 += sum1;
    } while (--block);
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  if (n % 2) {
    sum1 += static_cast<std::uint32_t>(p[0]) << 8;
    sum2 += sum1;
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  sum1 = (sum1 & 0xffff) + (sum1 >> 16);
  sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  return (sum2 << 16) | sum1;
}

// Checks the fletcher32 filter's trailer: the last 4 bytes hold the checksum of the bytes before
// them, little-endian. HDF5 also accepts the checksum with the bytes of each 16-bit half swapped
// (written by HDF5 < 1.6.3 on little-endian machines), and so does this.
// True when it matches; the payload is then the first n - 4 bytes.
inline bool fletcher32_matches(const std::byte* data, std::size_t n) noexcept {
  if (n < 4) return false;
  const auto* t = reinterpret_cast<const unsigned char*>(data + n - 4);
  const std::uint32_t stored =
      static_cast<std::uint32_t>(t[0]) | (static_cast<std::uint32_t>(t[1]) << 8) |
      (static_cast<std::uint32_t>(t[2]) << 16) | (static_cast<std::uint32_t>(t[3]) << 24);
  const std::uint32_t sum = fletcher32(data, n - 4);
  const std::uint32_t reversed = ((sum & 0x00ff00ffu) << 8) | ((sum >> 8) & 0x00ff00ffu);
  return stored == sum || stored == reversed;
}

// Reverses the bytes of each element in place (element_size 2, 4 or 8; others are left alone).
inline void byteswap_elements(std::byte* p, std::size_t n, std::size_t element_size) noexcept {
  if (element_size < 2) return;
  for (std::size_t i = 0; i + element_size <= n; i += element_size)
    std::reverse(p + i, p + i + element_size);
}

}  // namespace gpufeed::detail::hdf5
