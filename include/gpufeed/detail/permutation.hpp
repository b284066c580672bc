// gpufeed::detail — a keyed pseudo-random permutation of [0, n) in O(1) memory.
//
// A balanced Feistel network over the smallest even-bit domain 2^(2h) >= n is a bijection on
// that domain; "cycle walking" (re-applying it until the value lands below n) restricts it to a
// bijection on [0, n). The domain is less than 4n, so the expected number of walks is below 4;
// each costs `rounds` 64-bit mixes. No n-sized array is ever built, so shuffling a billion
// records costs the same memory as shuffling ten.
#pragma once

#include <bit>
#include <cstdint>

namespace gpufeed::detail {

// SplitMix64 finaliser: a fast, well-distributed 64-bit mix (Steele, Lea, Flood 2014).
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class feistel_permutation {
 public:
  static constexpr int rounds = 6;

  constexpr feistel_permutation(std::uint64_t n, std::uint64_t key) noexcept : n_(n) {
    const int bits = n <= 1 ? 2 : static_cast<int>(std::bit_width(n - 1));
    half_bits_ = (bits + 1) / 2;
    if (half_bits_ < 1) half_bits_ = 1;
    half_mask_ = (std::uint64_t{1} << half_bits_) - 1;
    std::uint64_t k = mix64(key ^ 0x6a09e667f3bcc909ull);
    for (auto& rk : round_keys_) {
      k = mix64(k);
      rk = k;
    }
  }

  [[nodiscard]] constexpr std::uint64_t size() const noexcept { return n_; }

  // The image of i in [0, n). Precondition: i < n.
  [[nodiscard]] constexpr std::uint64_t operator()(std::uint64_t i) const noexcept {
    std::uint64_t x = i;
    do {
      x = encrypt(x);
    } while (x >= n_);
    return x;
  }

 private:
  [[nodiscard]] constexpr std::uint64_t encrypt(std::uint64_t x) const noexcept {
    std::uint64_t left = x >> half_bits_;
    std::uint64_t right = x & half_mask_;
    for (const std::uint64_t rk : round_keys_) {
      const std::uint64_t f = mix64(right ^ rk) & half_mask_;
      const std::uint64_t next_right = left ^ f;
      left = right;
      right = next_right;
    }
    return (left << half_bits_) | right;
  }

  std::uint64_t n_;
  int half_bits_ = 1;
  std::uint64_t half_mask_ = 1;
  std::uint64_t round_keys_[rounds] = {};
};

}  // namespace gpufeed::detail
