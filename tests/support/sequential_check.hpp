// Drains a loader configured for sequential order (full partition) and checks, through the whole
// pipeline, that each epoch delivers records 0, 1, ..., n-1 in that order — so each exactly
// once — with the bytes of each accepted by `matches(index, bytes)`.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <span>

namespace gpufeed::test {

template <class Loader, class Matches>
void check_sequential_epochs(Loader& l, std::uint64_t n, std::uint64_t epochs, Matches matches) {
  std::uint64_t position = 0, out_of_order = 0, wrong_bytes = 0;
  while (auto b = l.next()) {
    for (std::size_t k = 0; k < b->size(); ++k, ++position) {
      const std::uint64_t i = b->indices()[k];
      out_of_order += i != position % n;
      wrong_bytes += !matches(i, std::span<const std::byte>(b->record(k)));
    }
  }
  CHECK(position == n * epochs);
  CHECK(out_of_order == 0);
  CHECK(wrong_bytes == 0);
}

}  // namespace gpufeed::test
