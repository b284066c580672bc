// gpufeed::detail::image — uniform draws from any uniform random bit generator, defined here
// rather than by std::uniform_*_distribution (whose algorithms differ between standard
// libraries), so an augmentation seeded the same way is the same on every platform.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace gpufeed::detail::image {

// 64 random bits from g: one call for a 64-bit generator, two for a 32-bit one.
template <class G>
std::uint64_t bits64(G& g) {
  using R = typename G::result_type;
  static_assert(std::numeric_limits<R>::digits >= 32 && G::min() == 0,
                "an image augmentation needs a generator of at least 32 bits from 0");
  if constexpr (G::max() == std::numeric_limits<std::uint64_t>::max()) {
    return static_cast<std::uint64_t>(g());
  } else {
    static_assert(G::max() >= 0xFFFFFFFFull, "a generator whose range is at least 2^32");
    const std::uint64_t hi = static_cast<std::uint64_t>(g()) & 0xFFFFFFFFull;
    return (hi << 32) | (static_cast<std::uint64_t>(g()) & 0xFFFFFFFFull);
  }
}

// Uniform in [0, 1) with 53 random bits.
template <class G>
double uniform01(G& g) {
  return static_cast<double>(bits64(g) >> 11) * 0x1.0p-53;
}

// Uniform in [lo, hi).
template <class G>
double uniform(G& g, double lo, double hi) {
  return lo + (hi - lo) * uniform01(g);
}

// Uniform integer in [0, n), n > 0 (multiply-shift: bias below n / 2^64).
__extension__ typedef unsigned __int128 uint128;  // GCC/Clang; __extension__: -Wpedantic
template <class G>
std::uint64_t below(G& g, std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<uint128>(bits64(g)) * n) >> 64);
}

// Python's round() to an integer: half to even (std::nearbyint in the default rounding mode).
inline long long py_round(double v) { return static_cast<long long>(std::nearbyint(v)); }

}  // namespace gpufeed::detail::image
