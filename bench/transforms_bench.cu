// transforms_bench — throughput of gpufeed's GPU transforms on a ~64 MiB batch, timed with CUDA
// events, beside the baseline every memory-bound kernel is bounded by: a device-to-device
// cudaMemcpyAsync of the same batch.
//
//   transforms_bench [iterations=50]
//
// GB/s counts bytes read plus bytes written (10^9 bytes/s). Without a CUDA device it prints
// "no CUDA device: <reason>" and exits 0.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device.hpp"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/event.hpp"
#include "gpufeed/cuda/normalize.cuh"
#include "gpufeed/cuda/pad.cuh"
#include "gpufeed/cuda/stream.hpp"

namespace gc = gpufeed::cuda;

namespace {

constexpr std::size_t batch_bytes = std::size_t{64} << 20;

struct row {
  std::string name;
  double bytes_in = 0, bytes_out = 0, us = 0;
};

// Mean microseconds per call of f over `iterations` calls queued back to back on s.
double time_us(const gc::stream& s, int iterations, const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();  // warm-up (first launch loads the module)
  gc::event start(gc::event::timing::enabled), stop(gc::event::timing::enabled);
  start.record(s);
  for (int i = 0; i < iterations; ++i) f();
  stop.record(s);
  stop.synchronize();
  return 1000.0 * gc::event::elapsed_ms(start, stop) / iterations;
}

void print(const std::vector<row>& rows, double copy_gbs) {
  std::printf("%-34s %10s %10s %10s %9s %8s\n", "transform", "in MiB", "out MiB", "time us",
              "GB/s", "vs copy");
  for (const auto& r : rows) {
    const double gbs = (r.bytes_in + r.bytes_out) / (r.us * 1e3);
    std::printf("%-34s %10.1f %10.1f %10.1f %9.1f %7.0f%%\n", r.name.c_str(),
                r.bytes_in / (1 << 20), r.bytes_out / (1 << 20), r.us, gbs, 100.0 * gbs / copy_gbs);
  }
}

template <class Out>
void bench_normalize(std::vector<row>& rows, const char* type, const gc::stream& s, int iterations,
                     const gc::device_buffer& in, std::size_t record_elems, std::size_t records) {
  const float mean[3] = {0.485f, 0.456f, 0.406f};
  const float stddev[3] = {0.229f, 0.224f, 0.225f};
  gc::device_buffer out(records * record_elems * sizeof(Out));
  for (const auto layout : {gc::channel_layout::hwc, gc::channel_layout::chw}) {
    const gc::normalizer<Out> n(layout, record_elems, mean, stddev, 1.0f / 255);
    const double us = time_us(s, iterations, [&] {
      n(in.as<const std::uint8_t>(), out.as<Out>(), records, s);
    });
    rows.push_back({std::string("normalize u8->") + type +
                        (layout == gc::channel_layout::hwc ? " HWC" : " CHW"),
                    double(records * record_elems), double(out.size()), us});
  }
}

// A packed batch of ~64 MiB: records of uniform random length in [0, 2 * mean_len] elements.
struct packed {
  gc::device_buffer data, offsets;
  gc::packed_batch view;
  std::uint64_t kept_bytes = 0;  // bytes the pad copies at max_len
};

packed make_packed(std::size_t element_bytes, std::size_t mean_len, std::size_t max_len) {
  std::mt19937 rng(1);
  std::vector<std::uint64_t> off{0};
  std::uint64_t kept = 0;
  while (off.back() < batch_bytes) {
    const std::uint64_t len = rng() % (2 * mean_len + 1);
    kept += std::min<std::uint64_t>(len, max_len) * element_bytes;
    off.push_back(off.back() + len * element_bytes);
  }
  packed p{gc::device_buffer(off.back()), gc::device_buffer(off.size() * 8), {}, kept};
  GPUFEED_CUDA_TRY(cudaMemset(p.data.data(), 7, off.back()));
  GPUFEED_CUDA_TRY(cudaMemcpy(p.offsets.data(), off.data(), off.size() * 8, cudaMemcpyHostToDevice));
  GPUFEED_CUDA_TRY(cudaDeviceSynchronize());
  p.view.data = p.data.data();
  p.view.bytes = off.back();
  p.view.offsets = p.offsets.as<std::uint64_t>();
  p.view.records = off.size() - 1;
  return p;
}

void bench_pad(std::vector<row>& rows, const gc::stream& s, int iterations, std::size_t element_bytes,
               std::size_t mean_len, std::size_t max_len) {
  const packed b = make_packed(element_bytes, mean_len, max_len);
  gc::pad_element e;
  e.bytes = element_bytes;
  const gc::padder p(b.view.records, e);
  gc::device_buffer out(gc::padded_bytes(b.view.records, max_len, element_bytes));
  gc::device_buffer lengths(b.view.records * 4), max_out(8);
  gc::padded_batch o;
  o.data = out.data();
  o.lengths = lengths.as<std::uint32_t>();
  o.max_len = max_len;
  const double records = double(b.view.records);
  const std::string tag = std::to_string(b.view.records) + " x " + std::to_string(element_bytes) +
                          "B, max " + std::to_string(max_len);
  rows.push_back({"pad " + tag, double(b.kept_bytes) + (records + 1) * 8,
                  double(out.size()) + records * 4,
                  time_us(s, iterations, [&] { p(b.view, o, s); })});
  rows.push_back({"max_length (CUB) " + std::to_string(b.view.records), (records + 1) * 8, 8.0,
                  time_us(s, iterations, [&] { p.max_length(b.view, max_out.as<std::uint64_t>(), s); })});
  gpufeed::cuda::check_pad_status(gc::read_pad_status(p.own_status(), s));
}

}  // namespace

int main(int argc, char** argv) {
  const auto& q = gc::query();
  if (!q.available) {
    std::printf("no CUDA device: %s\n", q.reason.c_str());
    return 0;
  }
  const int iterations = argc > 1 ? std::max(1, std::atoi(argv[1])) : 50;
  try {
    const auto props = gc::properties(0);
    std::printf("transforms_bench on %s (%d SMs, %.0f GiB), %d iterations each\n\n",
                props.name.c_str(), props.multiprocessors,
                double(props.total_memory) / (1ull << 30), iterations);
    const gc::stream s;
    std::vector<row> rows;

    gc::device_buffer a(batch_bytes), b(batch_bytes);
    GPUFEED_CUDA_TRY(cudaMemset(a.data(), 1, batch_bytes));
    GPUFEED_CUDA_TRY(cudaDeviceSynchronize());
    const double copy_us = time_us(s, iterations, [&] {
      GPUFEED_CUDA_TRY(cudaMemcpyAsync(b.data(), a.data(), batch_bytes, cudaMemcpyDeviceToDevice, s));
    });
    rows.push_back({"baseline: cudaMemcpyAsync D2D", double(batch_bytes), double(batch_bytes), copy_us});
    const double copy_gbs = 2.0 * batch_bytes / (copy_us * 1e3);

    // ImageNet-shaped records: 3 x 224 x 224 uint8, as many as fit in 64 MiB.
    const std::size_t record_elems = 3 * 224 * 224, records = batch_bytes / record_elems;
    bench_normalize<float>(rows, "f32", s, iterations, a, record_elems, records);
    bench_normalize<__half>(rows, "f16", s, iterations, a, record_elems, records);
    bench_normalize<__nv_bfloat16>(rows, "bf16", s, iterations, a, record_elems, records);

    bench_pad(rows, s, iterations, 1, 1024, 2048);  // bytes, ~1 KiB records, none truncated
    bench_pad(rows, s, iterations, 1, 1024, 1024);  // half of them truncated
    bench_pad(rows, s, iterations, 4, 256, 512);    // int32 tokens, ~1 KiB records
    print(rows, copy_gbs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "transforms_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
