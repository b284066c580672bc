// The transforms' host-side behaviour, valid with or without a GPU: argument validation happens
// before any CUDA call, so CI machines without a GPU check every typed error here.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "gpufeed/cuda/device.hpp"
#include "gpufeed/cuda/normalize.cuh"
#include "gpufeed/cuda/pad.cuh"
#include "gpufeed/cuda/transform.hpp"

// Inside namespace gpufeed: `cuda::` then names gpufeed::cuda, not CCCL's ::cuda.
namespace gpufeed {
using cuda::channel_layout;

namespace {
const std::array<float, 3> mean3{0.5f, 0.25f, 0.125f};
const std::array<float, 3> std3{0.25f, 0.5f, 2.0f};

// The message of the config_error that f throws (empty when it throws nothing or another type).
template <class F>
std::string config_message(F&& f) {
  try {
    f();
  } catch (const config_error& e) {
    return e.message();
  } catch (...) {
    return "<another exception>";
  }
  return {};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("normalizer: a valid configuration needs no GPU and keeps 1/std") {
  const cuda::normalizer<float> n(channel_layout::chw, 3 * 17, mean3, std3, 1.0f / 255);
  CHECK(n.channels() == 3);
  CHECK(n.record_elems() == 51);
  CHECK(n.layout() == channel_layout::chw);
  CHECK(n.scale() == 1.0f / 255);
  for (std::size_t c = 0; c < 3; ++c) {
    CHECK(n.mean(c) == mean3[c]);
    CHECK(n.inv_std(c) == 1.0f / std3[c]);
  }
  const cuda::normalizer<__half> copy = cuda::normalizer<__half>(channel_layout::hwc, 3, mean3, std3);
  CHECK(copy.scale() == 1.0f);
  const std::vector<float> sixteen(16, 1.0f);
  CHECK_NOTHROW(cuda::normalizer<__nv_bfloat16>(channel_layout::hwc, 32, sixteen, sixteen));
}

// normalizer is a value (no device state); padder owns device memory and is move-only.
static_assert(std::is_copy_constructible_v<cuda::normalizer<float>>);
static_assert(std::is_nothrow_move_constructible_v<cuda::padder>);
static_assert(std::is_nothrow_move_assignable_v<cuda::padder>);
static_assert(!std::is_copy_constructible_v<cuda::padder>);
static_assert(!std::is_copy_assignable_v<cuda::padder>);
static_assert(!std::is_constructible_v<cuda::pad_transform, cuda::padder&&, std::size_t>);

TEST_CASE("normalizer: every invalid parameter is a config_error that says what is wrong") {
  using N = cuda::normalizer<float>;
  const std::vector<float> none;
  const std::vector<float> seventeen(17, 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto msg = [](auto&& f) { return config_message(f); };

  CHECK(contains(msg([&] { N(channel_layout::hwc, 3, none, none); }), "no channels"));
  CHECK(contains(msg([&] { N(channel_layout::hwc, 17, seventeen, seventeen); }), "at most 16"));
  CHECK(contains(msg([&] { N(channel_layout::hwc, 3, mean3, std::vector<float>{1.0f, 1.0f}); }),
                 "3 means but 2 standard deviations"));
  CHECK(contains(msg([&] { N(channel_layout::hwc, 0, mean3, std3); }), "record_elems is 0"));
  CHECK(contains(msg([&] { N(channel_layout::chw, 10, mean3, std3); }),
                 "10 is not a multiple of the 3 channels"));
  CHECK(contains(msg([&] { N(channel_layout::hwc, 3, mean3, std3, inf); }), "scale is not finite"));
  CHECK(contains(msg([&] { N(channel_layout::hwc, 3, mean3, std3, nan); }), "scale is not finite"));
  CHECK(contains(msg([&] { N(channel_layout::hwc, 3, mean3, std::array<float, 3>{1, 0, 1}); }),
                 "std[1] is 0"));
  CHECK(contains(msg([&] { N(channel_layout::hwc, 3, mean3, std::array<float, 3>{1, 1, -2}); }),
                 "std[2] is negative"));
  CHECK(contains(msg([&] { N(channel_layout::hwc, 3, mean3, std::array<float, 3>{nan, 1, 1}); }),
                 "std[0] is not finite"));
  CHECK(contains(msg([&] { N(channel_layout::hwc, 3, mean3, std::array<float, 3>{1, 1e-45f, 1}); }),
                 "std[1] is too small"));
  CHECK(contains(msg([&] { N(channel_layout::hwc, 3, std::array<float, 3>{0, inf, 0}, std3); }),
                 "mean[1] is not finite"));
  CHECK(contains(msg([&] { N(static_cast<channel_layout>(7), 3, mean3, std3); }),
                 "unknown channel_layout"));
  // The plain function validates the same way, before touching the GPU.
  CHECK(contains(msg([&] {
                   cuda::normalize<float>(nullptr, nullptr, 1, 3, channel_layout::hwc, mean3,
                                          std::array<float, 3>{1, 0, 1}, 1.0f, nullptr);
                 }),
                 "std[1] is 0"));
}

TEST_CASE("normalizer: calls check their arguments before queuing anything") {
  const cuda::normalizer<__half> n(channel_layout::hwc, 6, mean3, std3);
  // An empty batch queues nothing, even without a GPU and with null pointers.
  CHECK_NOTHROW(n(nullptr, nullptr, 0, nullptr));
  CHECK_NOTHROW(cuda::normalize<float>(nullptr, nullptr, 0, 3, channel_layout::hwc, mean3, std3,
                                       1.0f, nullptr));
  __half* fake_out = reinterpret_cast<__half*>(std::uintptr_t{256});
  const auto* fake_in = reinterpret_cast<const std::uint8_t*>(std::uintptr_t{256});
  CHECK(contains(config_message([&] { n(nullptr, fake_out, 2, nullptr); }), "null input"));
  CHECK(contains(config_message([&] { n(fake_in, nullptr, 2, nullptr); }), "null input or output"));
  CHECK(contains(config_message([&] {
                   n(fake_in, fake_out, std::numeric_limits<std::size_t>::max() / 4, nullptr);
                 }),
                 "overflow"));
}

TEST_CASE("normalize_transform: checks the batch view before queuing anything") {
  const cuda::normalize_transform<float> t(cuda::normalizer<float>(channel_layout::hwc, 6, mean3, std3));
  gpufeed::batch_view v;
  v.records = 4;
  v.record_bytes = 0;
  CHECK_THROWS_AS(t(v, nullptr), unsupported_error);
  v.record_bytes = 5;
  CHECK(contains(config_message([&] { t(v, nullptr); }), "records have 5 bytes"));
  v.record_bytes = 6;
  v.data_bytes = 24;
  v.output_bytes = 24 * sizeof(float) - 1;
  CHECK(contains(config_message([&] { t(v, nullptr); }), "96 output bytes (has 95)"));
  v.data_bytes = 23;
  v.output_bytes = 96;
  CHECK(contains(config_message([&] { t(v, nullptr); }), "24 input bytes (has 23)"));
  v.records = 0;  // nothing to do: no check of the (empty) buffers, no CUDA call
  CHECK_NOTHROW(t(v, nullptr));
}

TEST_CASE("transform hook: normalize_transform and pad_transform fit it") {
  static_assert(cuda::device_transform<cuda::normalize_transform<__half>>);
  static_assert(cuda::device_transform<cuda::pad_transform>);
  static_assert(!cuda::device_transform<int>);
  cuda::transform_hook hook =
      cuda::normalize_transform<float>(cuda::normalizer<float>(channel_layout::hwc, 3, mean3, std3));
  gpufeed::batch_view v;
  CHECK(v.data == nullptr);
  CHECK(v.offsets == nullptr);
  CHECK(v.records == 0);
  CHECK(v.output == nullptr);
  v.record_bytes = 3;
  CHECK_NOTHROW(hook(v, nullptr));  // an empty batch
}

TEST_CASE("padder: invalid settings are config_errors, raised before any device allocation") {
  CHECK(contains(config_message([] { cuda::padder p(0); }), "max_records is 0"));
  cuda::pad_element three;
  three.bytes = 3;
  CHECK(contains(config_message([&] { cuda::padder p(8, three); }), "element size 3 bytes"));
  cuda::pad_element zero;
  zero.bytes = 0;
  CHECK(contains(config_message([&] { cuda::padder p(8, zero); }), "element size 0 bytes"));
  cuda::pad_element wide;
  wide.bytes = 2;
  wide.bits = 0x10000;
  CHECK(contains(config_message([&] { cuda::padder p(8, wide); }), "do not fit in a 2-byte"));
}

TEST_CASE("padder: without a GPU a valid padder is a cuda_error, never a crash") {
  if (cuda::has_device()) {
    cuda::padder p(1024, cuda::make_pad_element(std::int32_t{-1}));
    CHECK(p.max_records() == 1024);
    CHECK(p.element().bytes == 4);
    CHECK(p.own_status() != nullptr);
  } else {
    CHECK_THROWS_AS(cuda::padder(1024), cuda_error);
  }
}

TEST_CASE("make_pad_element keeps the value's bytes") {
  const auto a = cuda::make_pad_element(std::uint8_t{0xab});
  CHECK(a.bytes == 1);
  CHECK(a.bits == 0xab);
  const auto b = cuda::make_pad_element(std::int32_t{-1});
  CHECK(b.bytes == 4);
  CHECK(b.bits == 0xffffffffull);
  const auto c = cuda::make_pad_element(std::int16_t{0x1234});
  CHECK(c.bytes == 2);
  CHECK(c.bits == 0x1234);
  const auto d = cuda::make_pad_element(1.0);
  CHECK(d.bytes == 8);
  CHECK(d.bits == 0x3ff0000000000000ull);
  const auto e = cuda::make_pad_element(-2.0f);
  CHECK(e.bytes == 4);
  CHECK(e.bits == 0xc0000000ull);
}

TEST_CASE("pad sizes: padded_bytes and the pad_transform layout, overflow refused") {
  CHECK(cuda::padded_bytes(3, 5, 4) == 60);
  CHECK(cuda::padded_bytes(0, 5, 4) == 0);
  CHECK(contains(config_message([] {
                   (void)cuda::padded_bytes(std::numeric_limits<std::size_t>::max() / 2, 3, 1);
                 }),
                 "overflow"));
  CHECK(cuda::pad_transform_lengths_offset(3, 5, 1) == 16);
  CHECK(cuda::pad_transform_output_bytes(3, 5, 1) == 16 + 12);
  CHECK(cuda::pad_transform_lengths_offset(2, 4, 2) == 16);
}

TEST_CASE("pad_status: check_pad_status names the first malformed record") {
  cuda::pad_status s;
  CHECK_FALSE(s.first_malformed().has_value());
  s.truncated = 5;
  CHECK_NOTHROW(cuda::check_pad_status(s));  // truncation is reported, not an error
  s.malformed = 2;
  s.first_malformed_inv = ~std::uint64_t{41};
  REQUIRE(s.first_malformed().has_value());
  CHECK(*s.first_malformed() == 41);
  try {
    cuda::check_pad_status(s, "shard-7.h5");
    FAIL("expected format_error");
  } catch (const format_error& e) {
    CHECK(e.record() == 41);
    CHECK(e.file() == "shard-7.h5");
    CHECK(contains(e.message(), "2 malformed record(s)"));
    CHECK(contains(e.what(), "record 41"));
  }
  s.first_malformed_inv = ~std::uint64_t{0};
  CHECK(*s.first_malformed() == 0);
}

}  // namespace gpufeed
