// cuda::jpeg_batch_decoder on a GPU: JPEGs (baseline 4:2:0 / 4:2:2 / 4:4:4, grayscale,
// progressive, CMYK) decoded by nvJPEG's batched API and cropped by the fused kernel, against
// the CPU transform (TurboJPEG at full size + the CPU resample) with the same record_rng.
// - Without nvJPEG (backend none) and for the CPU route (CMYK; progressive on the hardware
//   backend), the bytes are the CPU transform's exactly: same decoder, same arithmetic.
// - Through nvJPEG they are close, not equal: nvJPEG's IDCT and chroma upsampling are not
//   libjpeg-turbo's (islow IDCT, "fancy" triangle upsampling), so single decoded pixels differ
//   by a few levels, more at sharp colour edges of subsampled chroma (nearest against triangle
//   upsampling: up to a quarter of a chroma step, which the colour conversion amplifies by up
//   to 1.8); the crop's filter then averages these. The synthetic pictures have hard edges and
//   per-channel noise, the worst case for chroma upsampling. Bounds: mean |difference| <= 3
//   levels per byte (a crop off by one pixel, a wrong flip or swapped channels gives tens) and
//   max <= 100 (local garbage gives 200+). The measured figures are printed for each record.
// - A corrupt JPEG in a batch is an error for its record alone (corrupt_error naming shard and
//   record); every other record is written. A small device budget (chunks) changes nothing.
#include <doctest/doctest.h>
#include <turbojpeg.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/jpeg_decode.cuh"
#include "gpufeed/cuda/pinned.hpp"
#include "gpufeed/cuda/stream.hpp"
#include "gpufeed/image/record_transforms.hpp"
#include "image_test_util.hpp"
#include "tj_encode.hpp"
#include "test_skip.hpp"

using namespace gpufeed;

namespace {

std::vector<std::byte> encode(const test::pixels& p, int sampling, int flags = 0) {
  return test::tj_encode(p, sampling, flags);
}

struct batch {
  std::vector<std::vector<std::byte>> jpegs;
  std::vector<bool> cpu_route_exact;  // decoded by TurboJPEG on every backend (CMYK)
  cuda::pinned_buffer pinned;
  std::vector<cuda::jpeg_item> items;

  batch() {
    const int dims[][2] = {{640, 480}, {333, 500}, {1024, 768}, {97, 61}, {800, 600}, {256, 256}, {500, 375}};
    for (int i = 0; i < 7; ++i) {
      const int w = dims[i][0], h = dims[i][1];
      const auto pic = test::synthetic_picture(w, h, i == 3 ? 1 : 3, static_cast<unsigned>(i + 1));
      const int sampling = i == 3 ? TJSAMP_GRAY : (i == 1 ? TJSAMP_422 : (i == 2 ? TJSAMP_444 : TJSAMP_420));
      jpegs.push_back(i == 5 ? test::cmyk_jpeg(test::synthetic_picture(w, h, 4, 9))
                             : encode(pic, sampling, i == 4 ? TJFLAG_PROGRESSIVE : 0));
      cpu_route_exact.push_back(i == 5);
    }
    std::size_t total = 0;
    for (auto& j : jpegs) total += j.size();
    pinned = cuda::pinned_buffer(total);
    std::size_t at = 0;
    for (std::size_t i = 0; i < jpegs.size(); ++i) {
      std::memcpy(pinned.data() + at, jpegs[i].data(), jpegs[i].size());
      error_context where;
      where.file = "gpu-shard.lmdb";
      where.record = 40 + i;
      items.push_back({std::span<const std::byte>(pinned.data() + at, jpegs[i].size()), where});
      at += jpegs[i].size();
    }
  }
};

// The CPU transform's record for item i (full-size decode), drawn from record_rng(3, 1, i).
std::vector<std::uint8_t> cpu_record(const batch& b, std::size_t i, int size, bool train) {
  std::vector<std::byte> out(static_cast<std::size_t>(size) * size * 3);
  record_input in;
  in.bytes = b.jpegs[i];
  in.index = i;
  record_rng rng(3, 1, i);
  if (train) {
    image::train_crop_options o;
    o.size = size;
    o.dct_scaling = false;
    image::random_resized_crop_transform(o)(in, out, rng);
  } else {
    image::eval_crop_options o;
    o.size = size;
    o.dct_scaling = false;
    image::center_crop_transform(o)(in, out, rng);
  }
  std::vector<std::uint8_t> v(out.size());
  std::memcpy(v.data(), out.data(), out.size());
  return v;
}

struct decoded {
  std::vector<std::vector<std::uint8_t>> records;
  cuda::jpeg_batch_result result;
};

decoded run(cuda::jpeg_batch_decoder& dec, const std::vector<cuda::jpeg_item>& items) {
  std::vector<record_rng> rngs;
  for (std::size_t i = 0; i < items.size(); ++i) rngs.emplace_back(3, 1, i);
  cuda::device_buffer out(dec.record_bytes() * items.size());
  cuda::stream s;
  GPUFEED_CUDA_TRY(cudaMemsetAsync(out.data(), 0, out.size(), s));
  decoded d;
  d.result = dec.decode(items, rngs, out.data(), s);
  std::vector<std::uint8_t> host(out.size());
  GPUFEED_CUDA_TRY(cudaMemcpyAsync(host.data(), out.data(), out.size(), cudaMemcpyDeviceToHost, s));
  GPUFEED_CUDA_TRY(cudaStreamSynchronize(s));
  for (std::size_t i = 0; i < items.size(); ++i)
    d.records.emplace_back(host.begin() + static_cast<std::ptrdiff_t>(i * dec.record_bytes()),
                           host.begin() + static_cast<std::ptrdiff_t>((i + 1) * dec.record_bytes()));
  return d;
}

void check_close(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
                 std::size_t i) {
  double sum = 0;
  int worst = 0;
  std::size_t over8 = 0;
  for (std::size_t j = 0; j < got.size(); ++j) {
    const int d = std::abs(int{got[j]} - int{want[j]});
    sum += d;
    over8 += d > 8 ? 1 : 0;
    worst = d > worst ? d : worst;
  }
  const double mean = sum / static_cast<double>(got.size());
  MESSAGE("record " << i << ": mean |nvJPEG - TurboJPEG| " << mean << ", max " << worst
                    << ", bytes off by more than 8: " << over8 << " of " << got.size());
  CHECK(mean <= 3.0);
  CHECK(worst <= 100);
}

}  // namespace

TEST_CASE("jpeg_batch_decoder without nvJPEG: the CPU transform's bytes exactly") {
  const batch b;
  for (bool train : {true, false}) {
    cuda::jpeg_decode_options o;
    o.backend = image::nvjpeg_backend::none;
    o.train = train;
    o.size = 160;
    cuda::jpeg_batch_decoder dec(o);
    const decoded d = run(dec, b.items);
    CHECK(d.result.cpu == b.items.size());
    for (std::size_t i = 0; i < b.items.size(); ++i) {
      CAPTURE(i);
      CHECK_FALSE(d.result.errors[i]);
      CHECK(d.records[i] == cpu_record(b, i, 160, train));
    }
  }
}

TEST_CASE("jpeg_batch_decoder through nvJPEG: close to the CPU transform, CPU route exact") {
  cuda::jpeg_batch_decoder dec;
  if (!dec.capability().gpu_decode()) GPUFEED_SKIP_TEST("no nvJPEG backend: " << dec.capability().notice);
  MESSAGE("nvJPEG " << dec.capability().version() << ", backend " << to_string(dec.capability().backend));
  const batch b;
  const decoded d = run(dec, b.items);
  CHECK(d.result.failed == 0);
  CHECK(d.result.gpu + d.result.cpu == b.items.size());
  for (std::size_t i = 0; i < b.items.size(); ++i) {
    CAPTURE(i);
    REQUIRE_FALSE(d.result.errors[i]);
    const auto want = cpu_record(b, i, 224, true);
    if (b.cpu_route_exact[i])
      CHECK(d.records[i] == want);
    else
      check_close(d.records[i], want, i);
  }
  // A budget of about one large image at a time: decoded in chunks, the same records.
  // (Without the host's share: each chunk's GPU images stay on the GPU.)
  cuda::jpeg_decode_options small;
  small.max_pixels = 1024 * 768;
  small.device_budget = small.max_pixels * 3 + 4096;
  small.host_share = false;
  cuda::jpeg_batch_decoder chunked(small);
  const decoded c = run(chunked, b.items);
  for (std::size_t i = 0; i < b.items.size(); ++i) CHECK(c.records[i] == d.records[i]);
}

TEST_CASE("jpeg_batch_decoder sharing with the host: each record is the GPU's or the CPU's exactly") {
  cuda::jpeg_decode_options gpu_only;
  gpu_only.host_share = false;
  cuda::jpeg_batch_decoder reference(gpu_only);
  if (!reference.capability().gpu_decode())
    GPUFEED_SKIP_TEST("no nvJPEG backend: " << reference.capability().notice);
  const batch b;
  const decoded g = run(reference, b.items);
  REQUIRE(g.result.moved == 0);
  cuda::jpeg_decode_options o;
  o.host_threads = 8;  // a small batch on many threads: the host side finishes first
  cuda::jpeg_batch_decoder dec(o);
  std::size_t moved = 0;
  for (int round = 0; round < 8; ++round) {
    const decoded d = run(dec, b.items);
    CHECK(d.result.failed == 0);
    CHECK(d.result.gpu + d.result.cpu == b.items.size());
    CHECK(d.result.moved <= d.result.cpu);
    std::size_t from_cpu = 0;
    for (std::size_t i = 0; i < b.items.size(); ++i) {
      CAPTURE(round);
      CAPTURE(i);
      const auto want = cpu_record(b, i, 224, true);
      const bool gpu_bytes = d.records[i] == g.records[i], cpu_bytes = d.records[i] == want;
      CHECK((gpu_bytes || cpu_bytes));
      // Images only the CPU decodes stay the CPU's; the others are the CPU's exactly when moved.
      if (cpu_bytes && !gpu_bytes) ++from_cpu;
    }
    const std::size_t forced = g.result.cpu;
    CHECK(from_cpu <= forced + d.result.moved);
    moved += d.result.moved;
  }
  MESSAGE("images the host took from the GPU over 8 rounds of " << b.items.size() << ": " << moved);
}

TEST_CASE("jpeg_batch_decoder: a corrupt JPEG fails its record alone, naming shard and record") {
  for (auto backend : {image::nvjpeg_backend::hardware, image::nvjpeg_backend::none}) {
    batch b;
    // Record 2's entropy-coded data cut: the header reads, the decode fails.
    std::vector<std::byte> cut(b.jpegs[2].begin(), b.jpegs[2].begin() + static_cast<std::ptrdiff_t>(b.jpegs[2].size() / 3));
    std::memcpy(const_cast<std::byte*>(b.items[2].bytes.data()), cut.data(), cut.size());
    b.items[2].bytes = b.items[2].bytes.first(cut.size());
    cuda::jpeg_decode_options o;
    o.backend = backend;
    cuda::jpeg_batch_decoder dec(o);
    const decoded d = run(dec, b.items);
    REQUIRE(d.result.errors[2]);
    CHECK(d.result.failed == 1);
    try {
      std::rethrow_exception(d.result.errors[2]);
    } catch (const corrupt_error& e) {
      CHECK(e.context().file == "gpu-shard.lmdb");
      CHECK(e.context().record == 42u);
    } catch (const std::exception& e) {
      FAIL("not a corrupt_error: " << e.what());
    }
    for (std::size_t i = 0; i < b.items.size(); ++i) {
      if (i == 2) continue;
      CAPTURE(i);
      CHECK_FALSE(d.result.errors[i]);
      const auto want = cpu_record(b, i, 224, true);
      if (backend == image::nvjpeg_backend::none || b.cpu_route_exact[i] || !dec.capability().gpu_decode())
        CHECK(d.records[i] == want);
      else
        check_close(d.records[i], want, i);
    }
  }
}
