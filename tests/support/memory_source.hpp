// A source held in memory for the loader's tests: record i's size and bytes are functions of i,
// so any delivered record can be checked without keeping a copy. Optional faults: records for
// which fail(i) is true throw corrupt_error naming the record; delay_us slows every read.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <thread>

#include "gpufeed/error.hpp"

#ifdef __CUDACC__
#define GPUFEED_TEST_HD __host__ __device__
#else
#define GPUFEED_TEST_HD
#endif

namespace gpufeed::test {

// Byte k of record i (also callable from device code in .cu tests).
GPUFEED_TEST_HD inline unsigned char expected_value(std::uint64_t record, std::uint64_t k) noexcept {
  std::uint64_t x = record * 0x9e3779b97f4a7c15ull + k * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return static_cast<unsigned char>(x * 0x94d049bb133111ebull >> 56);
}
inline std::byte expected_byte(std::uint64_t record, std::size_t k) noexcept {
  return static_cast<std::byte>(expected_value(record, k));
}
// Record i's size in a variable-size memory_source with max_var.
GPUFEED_TEST_HD inline std::size_t variable_size(std::uint64_t i, std::size_t max_var) noexcept {
  return 1 + static_cast<std::size_t>((i * 37) % max_var);
}

class memory_source {
 public:
  // fixed > 0: every record has `fixed` bytes; else record i has 1 + (i * 37) % max_var bytes.
  memory_source(std::uint64_t n, std::size_t fixed, std::size_t max_var = 0)
      : n_(n), fixed_(fixed), max_var_(max_var) {}

  std::uint64_t size() const { return n_; }
  std::size_t record_size(std::uint64_t i) const {
    return fixed_ ? fixed_ : variable_size(i, max_var_);
  }
  std::size_t fixed_record_size() const { return fixed_; }
  std::size_t max_record_size() const { return fixed_ ? fixed_ : max_var_; }
  bool has_labels() const { return true; }
  std::int64_t label(std::uint64_t i) const { return static_cast<std::int64_t>(i % 1000) - 7; }

  void read(std::uint64_t i, std::span<std::byte> dst) const {
    if (i >= n_) throw config_error("record out of range", error_context{.record = i});
    if (delay_us) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    if (fail && fail(i))
      throw corrupt_error("planted corruption", error_context{.file = "memory://test", .record = i});
    const std::size_t n = record_size(i);
    for (std::size_t k = 0; k < n; ++k) dst[k] = expected_byte(i, k);
  }

  // True when bytes hold exactly record i's contents.
  bool matches(std::uint64_t i, std::span<const std::byte> bytes) const {
    if (bytes.size() != record_size(i)) return false;
    for (std::size_t k = 0; k < bytes.size(); ++k)
      if (bytes[k] != expected_byte(i, k)) return false;
    return true;
  }

  std::function<bool(std::uint64_t)> fail;
  unsigned delay_us = 0;

 private:
  std::uint64_t n_;
  std::size_t fixed_, max_var_;
};

}  // namespace gpufeed::test
