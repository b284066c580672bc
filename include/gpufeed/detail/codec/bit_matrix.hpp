// gpufeed::detail::codec — the 8x8 bit-matrix transpose at the heart of Bitshuffle, shared by
// the CPU filter (bitshuffle.hpp) and the GPU's untranspose (cuda/detail/codec/unit_decode.hpp).
#pragma once

#include <cstdint>

#include "gpufeed/detail/host_device.hpp"

namespace gpufeed::detail::codec {

// Byte k of x is row k of an 8x8 bit matrix; returns its transpose: bit 8k + j moves to 8j + k.
// The transpose is its own inverse.
GPUFEED_HOST_DEVICE constexpr std::uint64_t transpose_8x8_bits(std::uint64_t x) noexcept {
  std::uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
  x ^= t ^ (t << 28);
  return x;
}

}  // namespace gpufeed::detail::codec
