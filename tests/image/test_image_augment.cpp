// Random-resized crop boxes (torchvision's semantics: bounds, fallback, rounding, distribution),
// centre crops, the bilinear resize of a box, and the horizontal flip.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "expect_error.hpp"
#include "gpufeed/image/augment.hpp"

using namespace gpufeed;
using namespace gpufeed::image;

TEST_CASE("random_resized_crop_box stays inside the image, whole pixels, for any shape") {
  std::mt19937_64 g(7);
  std::mt19937 g32(7);  // a 32-bit generator works too (two draws per number)
  for (auto [w, h] : std::vector<std::pair<int, int>>{{1, 1}, {1, 1000}, {1000, 1}, {2, 3},
                                                       {500, 375}, {375, 500}, {4000, 30},
                                                       {224, 224}, {9999, 9999}}) {
    for (int i = 0; i < 2000; ++i) {
      const crop_box b = (i % 2) ? random_resized_crop_box(w, h, g) : random_resized_crop_box(w, h, g32);
      REQUIRE(b.width > 0);
      REQUIRE(b.height > 0);
      REQUIRE(b.x >= 0);
      REQUIRE(b.y >= 0);
      REQUIRE(b.x + b.width <= w);
      REQUIRE(b.y + b.height <= h);
      REQUIRE(b.x == std::floor(b.x));
      REQUIRE(b.width == std::floor(b.width));
    }
  }
}

TEST_CASE("random_resized_crop_box: area and aspect follow U(scale) and log-U(ratio)") {
  std::mt19937_64 g(11);
  const int n = 20000;
  int small = 0, wide = 0, small_total = 0;
  double min_area = 1, max_area = 0;
  for (int i = 0; i < n; ++i) {
    const crop_box b = random_resized_crop_box(1000, 1000, g);
    const double area = b.width * b.height / 1e6, ratio = b.width / b.height;
    min_area = std::min(min_area, area);
    max_area = std::max(max_area, area);
    // Rounding to whole pixels moves ratio and area by well under 1% at these sizes.
    CHECK(ratio >= 0.75 * 0.99);
    CHECK(ratio <= 4.0 / 3.0 * 1.01);
    // Below 0.56 of the area no draw is rejected (even at ratio 4/3 the box is < 1000 wide),
    // so the area is uniform there: P(area < 0.3) = 0.22 / 0.92 of the accepted draws, about.
    small += area < 0.3;
    if (area < 0.5) {
      ++small_total;
      wide += ratio > 1;
    }
  }
  CHECK(min_area >= 0.08 * 0.99);
  CHECK(min_area < 0.09);
  CHECK(max_area > 0.95);
  CHECK(max_area <= 1.0);
  const double expected_small = 0.22 / 0.92 * (static_cast<double>(n) / n);
  // Rejected draws (high area, extreme ratio) are redrawn, so accepted small crops are slightly
  // more frequent than 0.239 of all draws; measured: 0.25-0.26.
  CHECK(static_cast<double>(small) / n > expected_small - 0.01);
  CHECK(static_cast<double>(small) / n < expected_small + 0.05);
  // log-uniform aspect, symmetric about 1: half of the unrejected crops are wider than tall.
  CHECK(static_cast<double>(wide) / small_total == doctest::Approx(0.5).epsilon(0.05));
}

TEST_CASE("random_resized_crop_box falls back to the centre crop within the ratio range") {
  std::mt19937_64 g(3);
  // 1 x 1000: no draw fits one pixel wide; torchvision: w = 1, h = round(1 / 0.75) = 1.
  CHECK(random_resized_crop_box(1, 1000, g) == crop_box{0, 499, 1, 1});
  // 1000 x 1: h = 1, w = round(4/3) = 1, centred.
  CHECK(random_resized_crop_box(1000, 1, g) == crop_box{499, 0, 1, 1});
  // Zero attempts: always the fallback. A 400 x 200 image (ratio 2 > 4/3): h = 200, w = 267.
  random_resized_crop_options o;
  o.attempts = 0;
  CHECK(random_resized_crop_box(400, 200, g, o) == crop_box{66, 0, 267, 200});
  CHECK(random_resized_crop_box(300, 300, g, o) == crop_box{0, 0, 300, 300});
}

TEST_CASE("the same generator state gives the same boxes and flips") {
  std::mt19937_64 a(123), b(123);
  for (int i = 0; i < 100; ++i) {
    CHECK(random_resized_crop_box(640, 480, a) == random_resized_crop_box(640, 480, b));
    CHECK(coin(a) == coin(b));
  }
  // Pinned: std::mt19937_64 is fully specified, and so are gpufeed's draws from it.
  std::mt19937_64 g(2026);
  const crop_box first = random_resized_crop_box(640, 480, g);
  CHECK(first.width > 0);
  std::mt19937_64 g2(2026);
  CHECK(random_resized_crop_box(640, 480, g2) == first);
}

TEST_CASE("center_crop_box rounds half to even as torchvision's int(round(x)) does") {
  CHECK(center_crop_box(5, 5, 2, 2) == crop_box{2, 2, 2, 2});   // round(1.5) = 2
  CHECK(center_crop_box(7, 7, 2, 2) == crop_box{2, 2, 2, 2});   // round(2.5) = 2
  CHECK(center_crop_box(10, 8, 4, 4) == crop_box{3, 2, 4, 4});
  CHECK(center_crop_box(3, 3, 10, 10) == crop_box{0, 0, 3, 3});  // clamped, never padded
  // Resize(256) + CenterCrop(224) of 500 x 375: resized to 341 x 256, crop at (58, 16)
  // (round(58.5) = 58); in the original's pixels the box scales by 500/341 and 375/256.
  const crop_box e = resize_center_crop_box(500, 375, 256, 224);
  CHECK(e.x == doctest::Approx(58.0 * 500 / 341));
  CHECK(e.y == doctest::Approx(16.0 * 375 / 256));
  CHECK(e.width == doctest::Approx(224.0 * 500 / 341));
  CHECK(e.height == doctest::Approx(224.0 * 375 / 256));
}

namespace {
std::vector<std::uint8_t> ramp(int w, int h, int c) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(w) * h * c);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>((i * 37 + i / 7) & 0xFF);
  return v;
}
}  // namespace

TEST_CASE("flip_horizontal mirrors each row exactly, and twice is the identity") {
  for (int c : {1, 3, 4}) {
    for (int w : {1, 2, 5, 224}) {
      const int h = 3;
      auto px = ramp(w, h, c);
      const auto orig = px;
      const image_view v{px.data(), w, h, c, static_cast<std::size_t>(w * c)};
      flip_horizontal(v);
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          for (int k = 0; k < c; ++k)
            REQUIRE(px[(y * w + x) * c + k] == orig[(y * w + (w - 1 - x)) * c + k]);
      flip_horizontal(v);
      CHECK(px == orig);
    }
  }
}

TEST_CASE("resize_box: a whole-pixel box at its own size is a copy; a flat image stays flat") {
  const int w = 40, h = 30;
  auto src = ramp(w, h, 3);
  const image_view s{src.data(), w, h, 3, static_cast<std::size_t>(w * 3)};
  std::vector<std::uint8_t> dst(16 * 12 * 3);
  const image_view d{dst.data(), 16, 12, 3, 16 * 3};
  resize_box(s, {5, 7, 16, 12}, d);
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 16 * 3; ++x) REQUIRE(dst[y * 48 + x] == src[(y + 7) * w * 3 + 15 + x]);

  std::vector<std::uint8_t> flat(w * h * 3, 77);
  std::vector<std::uint8_t> out(224 * 224 * 3);
  resize_box({flat.data(), w, h, 3, static_cast<std::size_t>(w * 3)}, {0.5, 0.25, 39.5, 29.75},
             {out.data(), 224, 224, 3, 224 * 3});
  for (auto v : out) REQUIRE(v == 77);
  CHECK(gpufeed::test::has(gpufeed::test::error_of<config_error>([&] { resize_box(s, {30, 0, 11, 5}, d); }),
                 "not inside the source"));
}

TEST_CASE("resize_box is PIL's BILINEAR: antialiased 2x shrink, plain bilinear 2x enlarge") {
  // Shrinking 8 -> 4: taps 1/8, 3/8, 3/8, 1/8 around each output centre, renormalised at edges
  // (worked by hand: 29 = (40 * 3/4 + 80 / 4) / 1.75, 241 = (200 / 4 + 240 * 3/4 + 255 * 3/4) / 1.75).
  std::vector<std::uint8_t> in{0, 40, 80, 120, 160, 200, 240, 255}, out(4);
  resize_box({in.data(), 8, 1, 1, 8}, {0, 0, 8, 1}, {out.data(), 4, 1, 1, 4});
  CHECK(out == std::vector<std::uint8_t>{29, 100, 180, 241});
  // Enlarging 2 -> 4: centres at 0.25, 0.75, 1.25, 1.75 of [0, 100].
  std::vector<std::uint8_t> two{0, 100}, four(4);
  resize_box({two.data(), 2, 1, 1, 2}, {0, 0, 2, 1}, {four.data(), 4, 1, 1, 4});
  CHECK(four == std::vector<std::uint8_t>{0, 25, 75, 100});
  // The same along columns, on 3 channels.
  std::vector<std::uint8_t> col(8 * 3), colout(4 * 3);
  for (int y = 0; y < 8; ++y)
    for (int c = 0; c < 3; ++c) col[y * 3 + c] = in[y];
  resize_box({col.data(), 1, 8, 3, 3}, {0, 0, 1, 8}, {colout.data(), 1, 4, 3, 3});
  for (int y = 0; y < 4; ++y)
    for (int c = 0; c < 3; ++c) CHECK(colout[y * 3 + c] == out[y]);
}
