// detail::image::decode_split, the share of a batch's GPU-decodable JPEGs the host threads take:
// nothing before the GPU's cost is known or when the host side is the slower one; one image per
// thread to learn the host's cost; then the share that makes both sides finish together; never
// more than the GPU's images; nothing when not adaptive.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "gpufeed/detail/image/decode_split.hpp"

using gpufeed::detail::image::decode_split;

TEST_CASE("decode_split: nothing moves until the GPU's cost is known, or when the host is slower") {
  decode_split s(4);
  CHECK(s.moved(10, 200) == 0);  // no GPU time recorded yet
  s.record_gpu(200, 0.010);      // 50 us per image on the GPU
  s.record_forced(0.004);        // 4 ms per forced image on one host thread
  // Host: 60 forced images / 4 threads * 4 ms = 60 ms > GPU 200 * 50 us = 10 ms.
  CHECK(s.moved(60, 200) == 0);
  CHECK(s.moved(10, 0) == 0);
}

TEST_CASE("decode_split: learns the moved cost with one image per thread, then balances") {
  decode_split s(4);
  s.record_gpu(200, 0.040);  // 200 us per GPU image: 40 ms for 200
  s.record_forced(0.004);    // 10 forced: 10 ms on 4 threads
  CHECK(s.moved(10, 200) == 4);
  s.record_moved(0.002);  // 2 ms per baseline image on the host
  // k = (40 ms - 10 ms) / (0.2 ms + 2 ms / 4) = 30 / 0.7 = 42.86 -> 42
  CHECK(s.moved(10, 200) == 42);
  // Both sides then take about the same time.
  const double host = (10 * 0.004 + 42 * 0.002) / 4, gpu = (200 - 42) * 0.0002;
  CHECK(std::abs(host - gpu) < 0.001);
  CHECK(s.moved(0, 3) <= 3);
}

TEST_CASE("decode_split: the means follow new samples; bad samples are ignored") {
  decode_split s(2);
  s.record_gpu(100, 0.010);
  CHECK(s.seconds_gpu() == doctest::Approx(1e-4));
  s.record_gpu(100, 0.020);
  CHECK(s.seconds_gpu() == doctest::Approx(0.8e-4 + 0.2 * 2e-4));
  s.record_forced(-1.0);
  s.record_forced(std::numeric_limits<double>::quiet_NaN());
  CHECK(s.seconds_forced() == 0);
  s.record_gpu(0, 1.0);
  CHECK(s.seconds_gpu() == doctest::Approx(0.8e-4 + 0.2 * 2e-4));
}

TEST_CASE("decode_split: not adaptive keeps every image on the GPU") {
  decode_split s(16, false);
  s.record_gpu(100, 1.0);
  s.record_forced(1e-6);
  s.record_moved(1e-6);
  CHECK(s.moved(0, 100) == 0);
}
