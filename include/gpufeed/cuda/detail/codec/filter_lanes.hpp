// gpufeed::cuda::detail — HDF5's size-preserving filters undone by a group of lanes: the byte
// unshuffle (shuffle, id 2) and the fletcher32 checksum (id 3), with the exact results of the
// CPU path's hdf5::unshuffle and hdf5::fletcher32_matches (detail/hdf5/filters.hpp). Plain C++,
// shared by the kernels and the host tests like lz4_block.hpp.
#pragma once

#include <cstdint>

#include "gpufeed/detail/host_device.hpp"

namespace gpufeed::cuda::detail {

// HDF5's shuffle stores n bytes of elements of e bytes as byte planes (byte 0 of each of the
// n / e elements, then byte 1, ...) followed by the n % e leftover bytes as they are; with
// e <= 1 or fewer than two elements everything is stored as it is. Lane `lane` of `lanes` writes
// its share of the unshuffled bytes [0, limit) (limit <= n) from src to dst (no overlap): the
// elements lane, lane + lanes, ... (reading each plane side by side), then the leftover bytes.
GPUFEED_HOST_DEVICE inline void lane_unshuffle(const std::uint8_t* src, std::uint8_t* dst,
                                               std::uint32_t n, std::uint32_t e,
                                               std::uint32_t limit, unsigned lane,
                                               unsigned lanes) {
  const std::uint32_t elements = e ? n / e : 0;
  if (e <= 1 || elements <= 1) {
    for (std::uint32_t i = lane; i < limit; i += lanes) dst[i] = src[i];
    return;
  }
  for (std::uint32_t i = lane; i < elements; i += lanes) {
    const std::uint32_t at = i * e;  // < n
    const std::uint32_t take = limit > at ? (limit - at < e ? limit - at : e) : 0;
    for (std::uint32_t b = 0; b < take; ++b) dst[at + b] = src[b * elements + i];
  }
  for (std::uint32_t i = elements * e + lane; i < limit; i += lanes) dst[i] = src[i];
}

// Byte j (< n) of the unshuffled form of src (see lane_unshuffle).
GPUFEED_HOST_DEVICE inline std::uint8_t unshuffled_byte(const std::uint8_t* src, std::uint32_t n,
                                                        std::uint32_t e, std::uint32_t j) {
  const std::uint32_t elements = e ? n / e : 0;
  if (e <= 1 || elements <= 1 || j >= elements * e) return src[j];
  return src[(j % e) * elements + j / e];
}

// HDF5's Fletcher-32 of n bytes as sums a lane can take part of. The serial definition reads m =
// ceil(n / 2) big-endian 16-bit words w_i (an odd last byte as a high byte) and folds its sums
// (x & 0xffff) + (x >> 16) often enough to stay in 32 bits; a fold keeps x mod 65535 and never
// turns a positive x into 0, and the final sums are at most 0xffff. So sum1 is 0 when every word
// is 0 and otherwise the representative in [1, 65535] of S1 = sum w_i mod 65535; sum2 likewise
// of S2 = sum (m - i) w_i (the sum of the running sum1's), which is positive exactly when some
// word is. A lane adds the words lane, lane + lanes, ...; the group adds the parts.
struct fletcher_part {
  std::uint32_t a = 0, w = 0;  // S1 and S2 of the lane's words, mod 65535
  bool nonzero = false;
};
GPUFEED_HOST_DEVICE inline fletcher_part lane_fletcher(const std::uint8_t* data, std::uint32_t n,
                                                       unsigned lane, unsigned lanes) {
  const std::uint32_t m = n / 2 + n % 2;
  std::uint64_t a = 0, w = 0;
  std::uint32_t any = 0;
  unsigned k = 0;
  for (std::uint32_t i = lane; i < m; i += lanes, ++k) {
    const std::uint32_t hi = data[2 * i], lo = 2 * i + 1 < n ? data[2 * i + 1] : 0u;
    const std::uint32_t word = (hi << 8) | lo;
    any |= word;
    a += word;
    w += std::uint64_t{m - i} * word;  // < 2^48: 4096 of them fit in 64 bits
    if ((k & 4095) == 4095) {
      a %= 65535;
      w %= 65535;
    }
  }
  return {static_cast<std::uint32_t>(a % 65535), static_cast<std::uint32_t>(w % 65535), any != 0};
}
// The checksum from the group's summed parts (a and w: sums of the lanes' parts).
GPUFEED_HOST_DEVICE inline std::uint32_t fletcher_from(std::uint64_t a, std::uint64_t w,
                                                       bool nonzero) {
  if (!nonzero) return 0;
  const auto s1 = static_cast<std::uint32_t>(a % 65535), s2 = static_cast<std::uint32_t>(w % 65535);
  return ((s2 ? s2 : 65535u) << 16) | (s1 ? s1 : 65535u);
}

// True when the fletcher32 filter's trailer `stored` (its 4 bytes read little-endian) accepts
// checksum `sum`: as it is, or with the bytes of each 16-bit half swapped (written by HDF5 <
// 1.6.3 on little-endian machines), as fletcher32_matches accepts.
GPUFEED_HOST_DEVICE inline bool fletcher32_accepts(std::uint32_t stored, std::uint32_t sum) {
  const std::uint32_t reversed = ((sum & 0x00ff00ffu) << 8) | ((sum >> 8) & 0x00ff00ffu);
  return stored == sum || stored == reversed;
}

// The 4 bytes at p, little-endian (the fletcher32 trailer's order).
GPUFEED_HOST_DEVICE inline std::uint32_t read_le32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) |
         (std::uint32_t{p[3]} << 24);
}

}  // namespace gpufeed::cuda::detail
