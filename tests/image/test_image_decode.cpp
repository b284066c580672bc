// image_decoder against djpeg (the reference decoder of the same libjpeg-turbo) at every DCT scale
// gpufeed uses, for baseline, progressive, 4:4:4, grayscale and CMYK JPEGs; PNG against its
// source pixels; corrupt, truncated and non-image bytes as typed errors naming shard and record.
#include <doctest/doctest.h>
#include <spng.h>

#include <cstring>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "gpufeed/image/decoder.hpp"
#include "image_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using namespace gpufeed::test;
using gpufeed::image::image_decoder;
using gpufeed::image::rgb_image;

namespace {

// Decoded RGB equals the reference (a PGM reference is compared channel-replicated).
void check_equal(const rgb_image& got, const pixels& ref) {
  REQUIRE(got.width() == ref.width);
  REQUIRE(got.height() == ref.height);
  REQUIRE(got.channels() == 3);
  std::size_t diff = 0;
  const std::size_t n = static_cast<std::size_t>(ref.width) * ref.height;
  for (std::size_t i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c) {
      const auto r = ref.data[ref.channels == 1 ? i : i * 3 + c];
      diff += got.data()[i * 3 + c] != r;
    }
  CHECK(diff == 0);
}

void check_all_scales(const temp_dir& dir, const std::vector<std::byte>& jpeg,
                      const std::string& name) {
  image_decoder dec;
  rgb_image px;
  for (int d : {1, 2, 4, 8}) {
    CAPTURE(name);
    CAPTURE(d);
    const auto h = dec.decode_jpeg_scaled(jpeg, d, px, {});
    CHECK(h.width == 301);
    CHECK(h.height == 213);
    check_equal(px, djpeg(dir.path(), jpeg, d, name));
  }
}

error_context record_context() {
  error_context c;
  c.file = "shard-007.lmdb";
  c.record = 42;
  return c;
}

}  // namespace

TEST_CASE("baseline, progressive, 4:4:4 and grayscale JPEGs decode as djpeg does at 1, 1/2, 1/4, 1/8") {
  temp_dir dir("img");
  const auto rgb = synthetic_picture(301, 213);
  check_all_scales(dir, cjpeg(dir.path(), rgb, "-quality 85", "baseline"), "baseline");
  check_all_scales(dir, cjpeg(dir.path(), rgb, "-quality 90 -progressive", "progressive"), "progressive");
  check_all_scales(dir, cjpeg(dir.path(), rgb, "-quality 95 -sample 1x1", "s444"), "s444");
  const auto jpeg = cjpeg(dir.path(), synthetic_picture(301, 213, 1), "-quality 85", "gray");
  check_all_scales(dir, jpeg, "gray");
  image_decoder dec;
  CHECK(dec.header(jpeg).components == 1);
}

TEST_CASE("a CMYK JPEG becomes RGB as djpeg converts it") {
  temp_dir dir("img");
  const auto jpeg = cmyk_jpeg(synthetic_picture(301, 213, 4));
  image_decoder dec;
  CHECK(dec.header(jpeg).components == 4);
  check_all_scales(dir, jpeg, "cmyk");
}

TEST_CASE("decode() picks the smallest power-of-two DCT scale that keeps the requested size") {
  temp_dir dir("img");
  const auto jpeg = cjpeg(dir.path(), synthetic_picture(301, 213), "-quality 85", "pick");
  image_decoder dec;
  rgb_image px;
  CHECK(dec.decode(jpeg, px).scale_denom == 1);
  CHECK(px.width() == 301);
  // 1/2 -> 151 x 107, 1/4 -> 76 x 54, 1/8 -> 38 x 27 (TurboJPEG rounds up).
  CHECK(dec.decode(jpeg, px, {}, 100, 100).scale_denom == 2);
  CHECK(px.width() == 151);
  CHECK(px.height() == 107);
  CHECK(dec.decode(jpeg, px, {}, 76, 54).scale_denom == 4);
  CHECK(dec.decode(jpeg, px, {}, 77, 54).scale_denom == 2);
  CHECK(dec.decode(jpeg, px, {}, 10, 10).scale_denom == 8);
  CHECK(dec.decode(jpeg, px, {}, 400, 10).scale_denom == 1);  // larger than the image: full size
  check_equal(px, djpeg(dir.path(), jpeg, 1, "pick"));
}

TEST_CASE("a truncated JPEG is a corrupt_error naming shard and record, not a grey-filled image") {
  temp_dir dir("img");
  const auto jpeg = cjpeg(dir.path(), synthetic_picture(301, 213), "-quality 85", "trunc");
  image_decoder dec;
  rgb_image px;
  for (const std::size_t keep : std::vector<std::size_t>{jpeg.size() / 2, jpeg.size() - 2, 40}) {
    CAPTURE(keep);
    const std::vector<std::byte> cut(jpeg.begin(), jpeg.begin() + static_cast<long>(keep));
    const auto what = error_of<corrupt_error>([&] { dec.decode(cut, px, record_context()); });
    CHECK(has(what, "corrupt JPEG"));
    CHECK(has(what, "file 'shard-007.lmdb', record 42"));
  }
  // The decoder is still usable after a failure.
  dec.decode(jpeg, px);
  CHECK(px.width() == 301);
}

TEST_CASE("damaged JPEG entropy data and a damaged header are corrupt_errors") {
  temp_dir dir("img");
  const auto jpeg = cjpeg(dir.path(), synthetic_picture(301, 213), "-quality 85", "damaged");
  image_decoder dec;
  rgb_image px;
  auto damaged = jpeg;
  // A marker in the middle of the scan: libjpeg warns "Corrupt JPEG data: premature end of data
  // segment" and would return a partly grey image.
  damaged[damaged.size() / 2] = std::byte{0xFF};
  damaged[damaged.size() / 2 + 1] = std::byte{0xD3};
  auto what = error_of<corrupt_error>([&] { dec.decode(damaged, px, record_context()); });
  CHECK(has(what, "record 42"));
  CHECK(has(what, "tjDecompress2"));
  // A header whose SOF marker is cut: no size can be read.
  std::vector<std::byte> header_only(jpeg.begin(), jpeg.begin() + 8);
  what = error_of<corrupt_error>([&] { (void)dec.header(header_only, record_context()); });
  CHECK(has(what, "tjDecompressHeader3"));
}

TEST_CASE("a JPEG frame libjpeg refuses leaves the decoder as good as new") {
  temp_dir dir("img");
  const auto rgb = synthetic_picture(301, 213);
  const auto good = cjpeg(dir.path(), rgb, "-quality 85", "good");
  const pixels ref = djpeg(dir.path(), good, 1, "good");
  image_decoder dec;
  rgb_image px;
  for (const bad_frame f : {bad_frame::precision_12, bad_frame::lossless, bad_frame::zero_width,
                            bad_frame::zero_height, bad_frame::too_high}) {
    CAPTURE(static_cast<int>(f));
    const auto bad = with_bad_frame(good, f);
    // Through header(), decode() and decode_jpeg_scaled(): each failure is a corrupt_error naming
    // the record, and the next good JPEG on the same decoder decodes exactly.
    CHECK(has(error_of<corrupt_error>([&] { (void)dec.header(bad, record_context()); }),
              "record 42"));
    (void)dec.header(good);
    CHECK(has(error_of<corrupt_error>([&] { dec.decode(bad, px, record_context()); }),
              "corrupt JPEG"));
    dec.decode(good, px);
    check_equal(px, ref);
    (void)error_of<corrupt_error>([&] { dec.decode_jpeg_scaled(bad, 2, px, record_context()); });
    dec.decode_jpeg_scaled(good, 1, px);
    check_equal(px, ref);
  }
}

TEST_CASE("bytes that are no image are a format_error") {
  image_decoder dec;
  rgb_image px;
  std::vector<std::byte> junk(100, std::byte{0x42});
  const auto what = error_of<format_error>([&] { dec.decode(junk, px, record_context()); });
  CHECK(has(what, "not a JPEG or PNG image"));
  CHECK(has(what, "record 42"));
  CHECK(has(error_of<format_error>([&] { dec.decode({}, px, record_context()); }), "0 bytes"));
}

TEST_CASE("an image over max_pixels is refused before it is decoded") {
  temp_dir dir("img");
  const auto jpeg = cjpeg(dir.path(), synthetic_picture(301, 213), "-quality 85", "big");
  image_decoder dec({.max_pixels = 301 * 212});
  rgb_image px;
  CHECK(has(error_of<unsupported_error>([&] { dec.decode(jpeg, px, record_context()); }),
            "301 x 213 pixels exceeds max_pixels"));
}

namespace {
std::vector<std::byte> encode_png(const pixels& p) {
  spng_ctx* ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = static_cast<std::uint32_t>(p.width);
  ihdr.height = static_cast<std::uint32_t>(p.height);
  ihdr.bit_depth = 8;
  ihdr.color_type = p.channels == 1 ? SPNG_COLOR_TYPE_GRAYSCALE : SPNG_COLOR_TYPE_TRUECOLOR;
  spng_set_ihdr(ctx, &ihdr);
  int rc = spng_encode_image(ctx, p.data.data(), p.data.size(), SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  std::size_t n = 0;
  void* buf = spng_get_png_buffer(ctx, &n, &rc);
  std::vector<std::byte> out(n);
  if (buf) std::memcpy(out.data(), buf, n);
  std::free(buf);
  spng_ctx_free(ctx);
  REQUIRE(rc == 0);
  return out;
}
}  // namespace

TEST_CASE("PNG decodes to its exact pixels; grayscale replicated; a bad CRC is a corrupt_error") {
  const auto rgb = synthetic_picture(97, 61);
  const auto png = encode_png(rgb);
  image_decoder dec;
  rgb_image px;
  const auto d = dec.decode(png, px);
  CHECK(d.header.format == gpufeed::image::image_format::png);
  check_equal(px, rgb);
  const auto gray = synthetic_picture(97, 61, 1);
  dec.decode(encode_png(gray), px);
  check_equal(px, gray);

  auto bad = png;
  bad[bad.size() / 2] ^= std::byte{0x5A};  // inside the IDAT data: its CRC no longer matches
  CHECK(has(error_of<corrupt_error>([&] { dec.decode(bad, px, record_context()); }), "corrupt PNG"));
  const std::vector<std::byte> cut(png.begin(), png.begin() + static_cast<long>(png.size() / 2));
  CHECK(has(error_of<corrupt_error>([&] { dec.decode(cut, px, record_context()); }), "record 42"));
}

TEST_CASE("a PNG header declaring more pixels than its bytes can hold: corrupt_error, no allocation") {
  // A valid 1-row PNG whose IHDR is rewritten to 10,000 x 10,000 gray (under max_pixels): the
  // filtered rows (100 MB) would take far more than its bytes at deflate's largest ratio.
  auto png = encode_png(synthetic_picture(16, 1, 1));
  const auto put32 = [&](std::size_t at, std::uint32_t v) {
    for (int k = 0; k < 4; ++k) png[at + k] = static_cast<std::byte>(v >> (24 - 8 * k));
  };
  put32(16, 10000);  // IHDR data starts at 16: width, height
  put32(20, 10000);
  std::uint32_t crc = 0xFFFFFFFFu;  // over the chunk type and data (bytes 12..28)
  for (std::size_t k = 12; k < 29; ++k) {
    crc ^= static_cast<std::uint32_t>(png[k]);
    for (int b = 0; b < 8; ++b) crc = crc >> 1 ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  put32(29, ~crc);
  image_decoder dec;
  rgb_image px;
  for (int call = 0; call < 2; ++call) {
    const auto what = error_of<corrupt_error>([&] {
      if (call == 0) (void)dec.header(png, record_context());
      else dec.decode(png, px, record_context());
    });
    CHECK(has(what, "declares 10000 x 10000 pixels"));
    CHECK(has(what, "record 42"));
  }
  CHECK(px.width() == 0);  // nothing was reshaped for it
}

TEST_CASE("one decoder over progressive, baseline, gray and CMYK JPEGs in turn stays exact") {
  // TurboJPEG 2.1.5's compressor corrupts baseline output after a progressive image on the same
  // handle (bench/photos/make_photo_set.cpp); the decompressor must not carry state either.
  temp_dir dir("img");
  const auto rgb = synthetic_picture(301, 213);
  const std::vector<std::vector<std::byte>> jpegs{
      cjpeg(dir.path(), rgb, "-quality 90 -progressive", "p"), cjpeg(dir.path(), rgb, "-quality 80", "b"),
      cjpeg(dir.path(), synthetic_picture(301, 213, 1), "-progressive", "g"),
      cmyk_jpeg(synthetic_picture(301, 213, 4)), cjpeg(dir.path(), rgb, "-quality 70", "b2")};
  image_decoder dec;
  rgb_image px;
  for (int round = 0; round < 2; ++round)
    for (std::size_t k = 0; k < jpegs.size(); ++k) {
      CAPTURE(k);
      const int d = k % 2 ? 2 : 1;
      dec.decode_jpeg_scaled(jpegs[k], d, px);
      check_equal(px, djpeg(dir.path(), jpegs[k], d, "seq" + std::to_string(k)));
    }
}
