// gpufeed::detail — a keyed pseudo-random permutation of [0, n) in O(1) memory.
//
// A balanced Feistel network over the smallest even-bit domain 2^(2h) >= n is a bijection on
// that domain; "cycle walking" (re-applying it until the value lands below n) restricts it to a
// bijection on [0, n). The domain is less than 4n, so the expected number of walks is below 4;
// each costs `rounds` 64-bit mixes. No n-sized array is ever built, so shuffling a billion
// records costs the same memory as shuffling ten.
//
// fill() gives the images of a run of inputs, the same values as operator(), `lanes` at a time:
// one image is a chain of dependent multiplies and its cycle walk an unpredictable branch, so
// computed one by one the CPU waits on each; lanes in lockstep keep its multipliers busy, and a
// lane whose value walks on stays in the lockstep instead of branching.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

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

  // out[k] = (*this)(first + k) for every k. Precondition: first + out.size() <= n.
  void fill(std::uint64_t first, std::span<std::uint64_t> out) const noexcept {
    images([first](std::size_t k) { return first + k; }, out);
  }

  // v = (*this)(v) for every v in `values`. Precondition: every v < n.
  void map(std::span<std::uint64_t> values) const noexcept {
    const std::uint64_t* in = values.data();
    images([in](std::size_t k) { return in[k]; }, values);
  }

 private:
  static constexpr std::size_t lanes = 8;

  // out[k] = (*this)(input(k)) for every k. input(k) is asked once, before out[k] is written and
  // after out[0, k) may have been (so `out` may hold the inputs). Each lane holds the value it
  // encrypts next (an input, or an image >= n walking on) and the place of its input; every step
  // stores each lane's image at its place: an image < n is final and the lane takes the next
  // input, one >= n is overwritten when its walk ends. Steps run while a whole step of inputs is
  // left, so every place written is in `out`; the lanes' last inputs then walk out alone.
  template <class Input>
  void images(Input input, std::span<std::uint64_t> out) const noexcept {
    const std::size_t count = out.size();
    std::size_t next = 0;  // the next input not yet in a lane
    if (count >= 2 * lanes) {
      std::uint64_t x[lanes], y[lanes];
      std::size_t at[lanes];
      for (std::size_t j = 0; j < lanes; ++j) {
        x[j] = input(j);
        at[j] = j;
      }
      next = lanes;
      while (next + lanes <= count) {
        encrypt_lanes(x, y);
        for (std::size_t j = 0; j < lanes; ++j) {
          out[at[j]] = y[j];
          const bool done = y[j] < n_;
          const std::uint64_t fresh = input(done ? next : at[j]);  // at[j]: any place read
          x[j] = done ? fresh : y[j];
          at[j] = done ? next : at[j];
          next += done;
        }
      }
      for (std::size_t j = 0; j < lanes; ++j) {
        std::uint64_t v = x[j];
        do {
          v = encrypt(v);
        } while (v >= n_);
        out[at[j]] = v;
      }
    }
    for (; next < count; ++next) out[next] = (*this)(input(next));
  }

  // y[j] = encrypt(x[j]) for every lane, round by round across the lanes.
  void encrypt_lanes(const std::uint64_t* x, std::uint64_t* y) const noexcept {
    std::uint64_t left[lanes], right[lanes];
    for (std::size_t j = 0; j < lanes; ++j) {
      left[j] = x[j] >> half_bits_;
      right[j] = x[j] & half_mask_;
    }
    for (const std::uint64_t rk : round_keys_) {
      for (std::size_t j = 0; j < lanes; ++j) {
        const std::uint64_t next_right = left[j] ^ (mix64(right[j] ^ rk) & half_mask_);
        left[j] = right[j];
        right[j] = next_right;
      }
    }
    for (std::size_t j = 0; j < lanes; ++j) y[j] = (left[j] << half_bits_) | right[j];
  }

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
