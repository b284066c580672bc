// train_crop / eval_crop: the one-call decode + crop equals the same steps done by hand (the box
// drawn first, then the flip; the DCT scale it should pick), is the same for the same generator
// state, and reports corrupt images with the caller's context.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "expect_error.hpp"
#include "gpufeed/image/crop_decode.hpp"
#include "image_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using namespace gpufeed::image;
using namespace gpufeed::test;

namespace {
std::vector<std::uint8_t> by_hand(const std::vector<std::byte>& jpeg, int denom, const crop_box& box,
                                  bool flip, int size) {
  image_decoder dec;
  rgb_image px;
  const auto h = dec.decode_jpeg_scaled(jpeg, denom, px);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(size) * size * 3);
  const image_view v{out.data(), size, size, 3, static_cast<std::size_t>(size) * 3};
  resize_box(px.view(),
             scale_box(box, double(px.width()) / h.width, double(px.height()) / h.height), v);
  if (flip) flip_horizontal(v);
  return out;
}
std::span<std::byte> as_bytes(std::vector<std::uint8_t>& v) {
  return {reinterpret_cast<std::byte*>(v.data()), v.size()};
}
}  // namespace

TEST_CASE("train_crop = box, flip draw, smallest sufficient DCT scale, resize, flip") {
  temp_dir dir("crop");
  const auto jpeg = cjpeg(dir.path(), synthetic_picture(640, 480), "-quality 90", "train");
  const int size = 64;
  train_crop crop({.size = size});
  int denoms[9] = {};
  for (int seed = 0; seed < 40; ++seed) {
    std::mt19937_64 g(seed), g2(seed);
    std::vector<std::uint8_t> out(crop.output_bytes());
    crop(jpeg, g, as_bytes(out));
    const crop_box box = random_resized_crop_box(640, 480, g2);
    const bool flip = coin(g2);
    // The smallest 1/d at which the box still covers >= 64 x 64 decoded pixels.
    int d = 8;
    while (d > 1 && (box.width * ((640 + d - 1) / d) / 640 < size ||
                     box.height * ((480 + d - 1) / d) / 480 < size))
      d /= 2;
    ++denoms[d];
    CAPTURE(seed);
    CHECK(out == by_hand(jpeg, d, box, flip, size));
  }
  CHECK(denoms[1] + denoms[2] + denoms[4] + denoms[8] == 40);
  CHECK(denoms[4] + denoms[8] > 0);  // the scaled path was taken

  // dct_scaling = false: always the full-size decode.
  train_crop full({.size = size, .dct_scaling = false});
  std::mt19937_64 g(5), g2(5);
  std::vector<std::uint8_t> out(full.output_bytes());
  full(jpeg, g, as_bytes(out));
  const crop_box box = random_resized_crop_box(640, 480, g2);
  CHECK(out == by_hand(jpeg, 1, box, coin(g2), size));
}

TEST_CASE("train_crop without flip, and eval_crop, are the documented boxes") {
  temp_dir dir("crop");
  const auto jpeg = cjpeg(dir.path(), synthetic_picture(500, 375), "-quality 90", "eval");
  eval_crop ev({.resize = 256, .size = 224, .dct_scaling = false});
  std::vector<std::uint8_t> out(ev.output_bytes());
  ev(jpeg, as_bytes(out));
  CHECK(out == by_hand(jpeg, 1, resize_center_crop_box(500, 375, 256, 224), false, 224));

  train_crop noflip({.size = 32, .flip = false});
  std::mt19937_64 g(9), g2(9);
  std::vector<std::uint8_t> o2(noflip.output_bytes());
  noflip(jpeg, g, as_bytes(o2));
  const crop_box box = random_resized_crop_box(500, 375, g2);
  CHECK(g() == g2());  // no flip draw was taken
  (void)box;
}

TEST_CASE("train_crop: a corrupt image names the shard and record; a short output is a config_error") {
  temp_dir dir("crop");
  auto jpeg = cjpeg(dir.path(), synthetic_picture(200, 150), "-quality 90", "bad");
  jpeg.resize(jpeg.size() / 2);
  train_crop crop({.size = 32});
  std::mt19937_64 g(1);
  std::vector<std::uint8_t> out(crop.output_bytes());
  error_context where;
  where.file = "images-00001.h5";
  where.record = 9;
  CHECK(has(error_of<corrupt_error>([&] { crop(jpeg, g, as_bytes(out), where); }),
            "file 'images-00001.h5', record 9"));
  std::vector<std::uint8_t> small(10);
  CHECK(has(error_of<config_error>([&] { crop(jpeg, g, as_bytes(small), where); }),
            "smaller than 32 x 32 x 3"));
}
