// Shared checks for the HDF5 source tests: read every record and compare byte for byte.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"

namespace gpufeed::test {

// Expected bytes of each record of a fixed dataset whose full contents are `values`.
template <class T>
std::vector<std::vector<std::byte>> rows_of(const std::vector<T>& values, std::size_t row_elems) {
  std::vector<std::vector<std::byte>> rows;
  const std::size_t n = row_elems ? values.size() / row_elems : 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto* p = reinterpret_cast<const std::byte*>(values.data() + i * row_elems);
    rows.emplace_back(p, p + row_elems * sizeof(T));
  }
  return rows;
}

// Reads every record forwards with one reader, backwards with another and in a strided order
// with the thread-safe read(); all must equal `expected`. Returns the number of mismatches.
inline std::size_t count_mismatches(const hdf5_source& src,
                                    const std::vector<std::vector<std::byte>>& expected) {
  std::size_t bad = 0;
  if (src.size() != expected.size()) return expected.size() + 1;
  std::vector<std::byte> buf(src.max_record_size() + 16);
  auto check = [&](std::uint64_t i) {
    const auto& want = expected[static_cast<std::size_t>(i)];
    if (src.record_size(i) != want.size() || !std::equal(want.begin(), want.end(), buf.begin()))
      ++bad;
  };
  auto fwd = src.make_reader();
  for (std::uint64_t i = 0; i < src.size(); ++i) {
    std::fill(buf.begin(), buf.end(), std::byte{0xee});
    fwd.read(i, buf);
    check(i);
  }
  auto back = src.make_reader();
  for (std::uint64_t i = src.size(); i-- > 0;) {
    std::fill(buf.begin(), buf.end(), std::byte{0xdd});
    back.read(i, buf);
    check(i);
  }
  const std::uint64_t n = src.size();
  for (std::uint64_t k = 0; k < n; ++k) {
    const std::uint64_t i = (k * 7919) % n;
    std::fill(buf.begin(), buf.end(), std::byte{0xcc});
    src.read(i, std::span<std::byte>(buf.data(), src.record_size(i)));
    check(i);
  }
  return bad;
}

}  // namespace gpufeed::test
