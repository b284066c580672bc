// The gather's copy (cuda/detail/codec/gather_lanes.hpp) on the host, lanes emulated one after
// another as the GPU's groups of 8, 16 and 32 lanes run them: every run, at every alignment of
// source and destination and every length, cut into any number of pieces, lands byte for byte
// and nothing else is written; runs outside the cache or the data region are recognised for any
// value, overflowing ones included.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gpufeed/cuda/detail/codec/gather_lanes.hpp"

namespace cd = gpufeed::cuda::detail;
namespace dd = gpufeed::detail::device_decode;

namespace {

// Copies run r as the kernel does: every piece, every lane of a group.
void emulate(const std::vector<std::uint8_t>& cache, std::vector<std::uint8_t>& dst,
             const dd::gather_run& r, std::uint32_t pieces, unsigned lanes) {
  for (std::uint32_t p = 0; p < pieces; ++p)
    for (unsigned lane = 0; lane < lanes; ++lane)
      cd::gather_piece(cache.data(), dst.data(), r, p, pieces, lane, lanes);
}

}  // namespace

TEST_CASE("a run lands byte for byte at every alignment, length, piece count and group size") {
  std::mt19937_64 rng(31);
  std::vector<std::uint8_t> cache(1 << 16);  // a multiple of 16, like a device allocation
  for (auto& b : cache) b = static_cast<std::uint8_t>(rng());
  std::vector<std::uint8_t> dst(1 << 16), want(1 << 16);
  const std::uint64_t lengths[] = {0, 1, 2, 3, 4, 5, 7, 15, 16, 17, 31, 33, 100, 127, 128, 129,
                                   255, 1000, 4096, 4099, 20000};
  int runs = 0;
  for (std::uint64_t len : lengths)
    for (std::uint64_t sa = 0; sa < 16; ++sa)
      for (std::uint64_t da = 0; da < 16; da += (len > 1000 ? 5 : 1)) {
        const dd::gather_run r{sa + 16 * (rng() % 64), da + 16 * (rng() % 64), len};
        for (const unsigned lanes : {8u, 16u, 32u})
          for (const std::uint32_t pieces : {1u, 2u, 3u, 7u, 64u}) {
            if (len > 1000 && pieces != 1 && pieces != 7) continue;
            std::fill(dst.begin(), dst.end(), 0xEE);
            want.assign(dst.begin(), dst.end());
            std::copy(cache.begin() + static_cast<std::ptrdiff_t>(r.src),
                      cache.begin() + static_cast<std::ptrdiff_t>(r.src + r.len),
                      want.begin() + static_cast<std::ptrdiff_t>(r.dst));
            REQUIRE(cd::gather_run_inside(r, cache.size(), dst.size()));
            emulate(cache, dst, r, pieces, lanes);
            INFO("len " << len << " src " << r.src << " dst " << r.dst << " lanes " << lanes
                        << " pieces " << pieces);
            REQUIRE(dst == want);
            ++runs;
          }
      }
  CHECK(runs > 10000);
}

TEST_CASE("runs outside the cache or the data region are recognised, overflow included") {
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t cache = 1000, data = 500;
  CHECK(cd::gather_run_inside({0, 0, 0}, cache, data));
  CHECK(cd::gather_run_inside({1000, 500, 0}, cache, data));
  CHECK(cd::gather_run_inside({500, 0, 500}, cache, data));
  CHECK_FALSE(cd::gather_run_inside({501, 0, 500}, cache, data));
  CHECK_FALSE(cd::gather_run_inside({0, 1, 500}, cache, data));
  CHECK_FALSE(cd::gather_run_inside({1001, 0, 0}, cache, data));
  CHECK_FALSE(cd::gather_run_inside({0, 501, 0}, cache, data));
  CHECK_FALSE(cd::gather_run_inside({max - 4, 0, 16}, cache, data));
  CHECK_FALSE(cd::gather_run_inside({0, max - 4, 16}, cache, data));
  CHECK_FALSE(cd::gather_run_inside({0, 0, max}, cache, data));
  CHECK_FALSE(cd::gather_run_inside({10, 10, 600}, cache, data));
}
