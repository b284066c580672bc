// The order computed a run of positions at a time (feistel_permutation::fill and map, the
// epoch sequence's runs) gives exactly what it gives one position at a time.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "gpufeed/detail/order/sequence.hpp"
#include "gpufeed/detail/permutation.hpp"
#include "gpufeed/sample_order.hpp"

using namespace gpufeed;

TEST_CASE("the permutation's fill and map give operator()'s images, at any length and start") {
  for (const std::uint64_t n : {1, 2, 15, 16, 17, 33, 100, 1000, 65536, 100003}) {
    const detail::feistel_permutation p(n, n * 3 + 7);
    for (const std::uint64_t first : {std::uint64_t{0}, std::uint64_t{1}, n / 3}) {
      for (const std::uint64_t len : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{15},
                                      std::uint64_t{16}, std::uint64_t{17}, std::uint64_t{40}, n}) {
        if (first + len > n) continue;
        CAPTURE(n);
        CAPTURE(first);
        CAPTURE(len);
        std::vector<std::uint64_t> out(len), mapped(len), one(len);
        p.fill(first, out);
        for (std::uint64_t k = 0; k < len; ++k) {
          one[k] = p(first + k);
          mapped[k] = (first + k) * 7919 % n;  // any inputs, not a run
        }
        CHECK(out == one);
        std::vector<std::uint64_t> want(len);
        for (std::uint64_t k = 0; k < len; ++k) want[k] = p(mapped[k]);
        p.map(mapped);
        CHECK(mapped == want);
      }
    }
  }
}

TEST_CASE("an epoch's positions filled in runs hold the records filled one by one") {
  // Runs cross windows, the short unit's window and the epoch's end; units of a power of two
  // records (a shift), of other sizes (a multiply), of varying sizes (a search) and of one record.
  struct shape {
    std::uint64_t n, per_unit, window;
    bool varying;
  };
  const shape shapes[] = {{1000, 64, 5, false}, {1003, 64, 3, false}, {5000, 7, 9, false},
                          {4099, 100, 4, false}, {777, 1, 50, false},  {2000, 13, 6, true}};
  for (const shape& c : shapes) {
    record_units u = record_units::uniform(c.n, c.per_unit);
    if (c.varying) {
      std::vector<std::uint64_t> starts;
      for (std::uint64_t i = 0, k = 0; i < c.n; i += c.per_unit + k++ % 5) starts.push_back(i);
      u = record_units::from_starts(std::move(starts), c.n);
    }
    for (const auto order : {sample_order::shuffled, sample_order::block_shuffled}) {
      CAPTURE(c.n);
      CAPTURE(c.per_unit);
      CAPTURE(to_string(order));
      const detail::epoch_sequence seq(order, c.n, 11, u, c.window);
      for (const std::uint64_t epoch : {0, 3}) {
        std::vector<std::uint64_t> all(c.n + 100), one(c.n + 100);
        seq.fill(epoch, c.n - 37, all);  // wraps past the epoch's end
        for (std::uint64_t k = 0; k < one.size(); ++k)
          seq.fill(epoch, c.n - 37 + k, std::span(&one[k], 1));
        CHECK(all == one);
        std::vector<char> seen(c.n, 0);
        for (std::uint64_t k = 0; k < c.n; ++k) seen[all[k]] = 1;
        CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(c.n));
      }
    }
  }
}
