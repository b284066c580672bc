// The per-record transform stage composed with a GPU transform on a device target: the workers
// random-crop and flip uint8 HWC "images" into uint8 CHW records in the pinned slot, the batch is
// copied to the device, and cuda::normalize_transform (channel_layout::chw) turns it into float
// CHW in batch::output(). Every float is checked against a host reference computed from
// (seed, epoch, record) and the source's bytes.
#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <span>
#include <vector>

#include "gpufeed/cuda/device_target.hpp"
#include "gpufeed/cuda/normalize.cuh"
#include "gpufeed/cuda/stream.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/record_transform.hpp"
#include "memory_source.hpp"

using namespace gpufeed;
using test::memory_source;

namespace {

constexpr std::size_t C = 3, H = 12, W = 12, CH = 8, CW = 8;  // 12x12 images, 8x8 crops
constexpr std::size_t out_elems = C * CH * CW;

// Where record i's crop starts and whether it is flipped: the first draws of its generator.
struct crop {
  std::size_t y = 0, x = 0;
  bool flip = false;
};
crop crop_of(record_rng& rng) {
  crop c;
  c.y = static_cast<std::size_t>(rng.below(H - CH + 1));
  c.x = static_cast<std::size_t>(rng.below(W - CW + 1));
  c.flip = rng.chance(0.5);
  return c;
}

// The CPU stage: HWC in, CHW out (planar, so the normalizer's chw layout gives float CHW).
void crop_flip_chw(const record_input& in, std::span<std::byte> out, record_rng& rng) {
  const crop c = crop_of(rng);
  for (std::size_t ch = 0; ch < C; ++ch)
    for (std::size_t y = 0; y < CH; ++y)
      for (std::size_t x = 0; x < CW; ++x) {
        const std::size_t sx = c.x + (c.flip ? CW - 1 - x : x);
        out[(ch * CH + y) * CW + x] = in.bytes[((c.y + y) * W + sx) * C + ch];
      }
}

}  // namespace

TEST_CASE("CPU crop + flip to uint8 CHW in the workers, then normalize to float CHW on the GPU") {
  constexpr std::size_t batch_size = 16;
  constexpr std::uint64_t n = 200;
  memory_source src(n, H * W * C);
  cuda::stream consumer;
  const float mean[C] = {120.f, 110.f, 100.f}, stddev[C] = {60.f, 55.f, 50.f};
  const cuda::normalizer<float> norm(cuda::channel_layout::chw, out_elems, mean, stddev, 1.0f);
  loader_config cfg;
  cfg.batch_size = batch_size;
  cfg.part = partition{};
  cfg.seed = 5;
  cfg.epochs = 2;
  cfg.target = cuda::device(0);
  cfg.consumer_stream = consumer;
  cfg.per_record = record_transform::fixed(out_elems, crop_flip_chw);
  cfg.transform = cuda::normalize_transform<float>(norm);
  cfg.transform_output_bytes = batch_size * out_elems * sizeof(float);
  loader<memory_source> l(src, cfg);
  std::vector<float> out(batch_size * out_elems);
  std::size_t wrong = 0, checked = 0, flipped = 0;
  std::set<std::uint64_t> seen[2];
  while (auto b = l.next()) {
    CHECK(b->record_bytes() == out_elems);
    GPUFEED_CUDA_TRY(cudaMemcpyAsync(out.data(), b->output().data(),
                                     b->size() * out_elems * sizeof(float),
                                     cudaMemcpyDeviceToHost, consumer));
    consumer.synchronize();
    for (std::size_t k = 0; k < b->size(); ++k) {
      const std::uint64_t i = b->host_indices()[k];
      CHECK(seen[b->epoch()].insert(i).second);
      record_rng rng(5, b->epoch(), i);
      const crop c = crop_of(rng);
      flipped += c.flip;
      for (std::size_t ch = 0; ch < C; ++ch)
        for (std::size_t y = 0; y < CH; ++y)
          for (std::size_t x = 0; x < CW; ++x) {
            const std::size_t sx = c.x + (c.flip ? CW - 1 - x : x);
            const float v = test::expected_value(i, ((c.y + y) * W + sx) * C + ch);
            const float expect = (v * 1.0f - mean[ch]) * (1.0f / stddev[ch]);
            wrong += out[k * out_elems + (ch * CH + y) * CW + x] != expect;
            ++checked;
          }
    }
  }
  CHECK(seen[0].size() == n);
  CHECK(seen[1].size() == n);
  CHECK(checked == 2 * n * out_elems);
  CHECK(wrong == 0);
  CHECK(flipped > 0);
  CHECK(flipped < 2 * n);
}
