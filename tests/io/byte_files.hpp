// Shared by the byte-source tests: files of known bytes, and the io_error a read throws.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "gpufeed/error.hpp"

namespace gpufeed::test {

// n bytes that differ at every offset a test reads (no run of zeros a wrong read could match);
// another seed gives other bytes.
inline std::vector<std::byte> pattern(std::size_t n, unsigned seed = 0) {
  std::vector<std::byte> b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::byte>(1 + (i * 131 + i / 251 + seed) % 255);
  return b;
}

inline std::filesystem::path write_bytes(const std::filesystem::path& p,
                                         const std::vector<std::byte>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return p;
}

inline std::vector<std::byte> slice(const std::vector<std::byte>& b, std::size_t at,
                                    std::size_t n) {
  return {b.begin() + static_cast<std::ptrdiff_t>(at),
          b.begin() + static_cast<std::ptrdiff_t>(at + n)};
}

// The io_error that f throws (a doctest failure when it throws none or another type).
template <class F>
io_error io_error_of(F&& f) {
  try {
    f();
  } catch (const io_error& e) {
    return e;
  }
  FAIL("no io_error thrown");
  throw std::logic_error("unreachable");
}

}  // namespace gpufeed::test
