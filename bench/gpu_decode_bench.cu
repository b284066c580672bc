// gpu_decode_bench: the GPU chunk decoders' kernel rate on device-resident compressed chunks,
// beside the CPU filter decoders (one thread, every thread) on the same chunks.
//
//   gpu_decode_bench [--mib N] [--reps N] [--data coarse|smooth]
//
// Data: float32 rows of a slow wave quantised to 1/256 (coarse: values in [0, 4), which LZ4
// alone compresses; smooth: amplitude 100, which needs Bitshuffle first), in 1 MiB chunks,
// written as the HDF5 plugins write them: LZ4 (32004) in 64 KiB, 16 KiB and 1 MiB blocks,
// Bitshuffle + LZ4 (32008, default 8 KiB blocks), deflate (1: one zlib stream a chunk, levels 4
// and 1), and h5py's gzip + shuffle (shuffle of 4-byte elements then deflate level 4, through the
// device stage buffer). The kernel's time is the median of --reps runs timed with CUDA events;
// every case's output is compared with the input once.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../tests/gpu_decode/codec_data.hpp"
#include "../tests/gpu_decode/filter_data.hpp"
#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/detail/codec/unit_kernels.cuh"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/detail/codec/deflate.hpp"
#include "gpufeed/detail/codec/lz4.hpp"

namespace codec = gpufeed::detail::codec;
namespace cd = gpufeed::cuda::detail;
using gpufeed_test::bytes;

namespace {

struct chunked {
  std::string name;
  bytes src;                            // every chunk, back to back
  std::vector<std::size_t> chunk_at;    // where each chunk starts in src
  std::vector<codec::gpu_unit> units;
  std::uint32_t scratch = 0;
  std::size_t chunk_bytes = 0;
  std::uint64_t stage_bytes = 0;  // shuffled deflate: the stage buffer its units use
};

constexpr std::size_t data_chunk = 1 << 20;  // the data is made in pieces of this size

chunked make_case(const std::string& name, const bytes& data, int kind, std::size_t block,
                  std::size_t chunk_bytes) {
  chunked c;
  c.name = name;
  c.chunk_bytes = chunk_bytes;
  for (std::size_t at = 0; at < data.size(); at += chunk_bytes) {
    const std::span<const std::uint8_t> part(data.data() + at, chunk_bytes);
    const bytes chunk =
        kind == 0   ? gpufeed_test::lz4_filter_chunk(part, block)
        : kind == 1 ? gpufeed_test::bitshuffle_chunk(part, 4, block, 2)
        : kind == 2 ? gpufeed_test::zlib_compress(part, static_cast<int>(block))
                    : gpufeed_test::zlib_compress(
                          gpufeed_test::shuffle_bytes(bytes(part.begin(), part.end()), 4),
                          static_cast<int>(block));
    const auto in = gpufeed_test::as_bytes(chunk);
    codec::result r;
    if (kind == 3) {
      const std::vector<gpufeed::detail::hdf5::filter_step> pipeline = {
          gpufeed_test::step(gpufeed::detail::codec::kind::shuffle, 4),
          gpufeed_test::step(gpufeed::detail::codec::kind::deflate)};
      const auto plan = gpufeed::detail::hdf5::plan_gpu_chunk(
          pipeline, 0, in, chunk_bytes, c.src.size(), at, c.stage_bytes, c.units);
      r = plan.status;
      c.stage_bytes += plan.stage_bytes;
    } else {
      r = kind == 0   ? codec::plan_lz4_chunk(in, c.src.size(), at, chunk_bytes, c.units)
          : kind == 1 ? codec::plan_bitshuffle_chunk(in, c.src.size(), at, chunk_bytes, 4, block,
                                                     2, c.units)
                      : codec::plan_deflate_chunk(in, c.src.size(), at, chunk_bytes, c.units);
    }
    if (!r.ok) {
      std::fprintf(stderr, "planning failed: %s\n", r.message.c_str());
      std::exit(1);
    }
    c.chunk_at.push_back(c.src.size());
    c.src.insert(c.src.end(), chunk.begin(), chunk.end());
  }
  for (const auto& u : c.units)
    c.scratch = std::max(c.scratch, cd::unit_scratch_bytes(u));
  return c;
}

// Decodes chunks [first, last) of a case with the CPU filter decoders into `out`.
void cpu_decode(const chunked& c, int kind, std::size_t first, std::size_t last, bytes& out) {
  codec::bitshuffle_decoder bs;
  codec::deflate_decoder inflater;
  bytes shuffled(c.chunk_bytes);
  for (std::size_t i = first; i < last; ++i) {
    const std::size_t end = i + 1 < c.chunk_at.size() ? c.chunk_at[i + 1] : c.src.size();
    const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(c.src.data()) + c.chunk_at[i],
                                        end - c.chunk_at[i]);
    const std::span<std::byte> dst(reinterpret_cast<std::byte*>(out.data()) + i * c.chunk_bytes,
                                   c.chunk_bytes);
    const codec::result r =
        kind == 0   ? codec::lz4_filter_decode(in, dst)
        : kind == 1 ? bs.decode(in, dst, 4, 0, 2)
        : kind == 2 ? inflater.decode(in, dst)
                    : inflater.decode(in, {reinterpret_cast<std::byte*>(shuffled.data()),
                                           shuffled.size()});
    if (r.ok && kind == 3)  // the CPU path's unshuffle after inflating
      gpufeed::detail::hdf5::unshuffle(reinterpret_cast<const std::byte*>(shuffled.data()),
                                       dst.data(), dst.size(), 4);
    if (!r.ok) {
      std::fprintf(stderr, "CPU decode failed: %s\n", r.message.c_str());
      std::exit(1);
    }
  }
}

double cpu_rate(const chunked& c, int kind, std::size_t bytes_total, unsigned threads) {
  bytes out(bytes_total);
  cpu_decode(c, int(kind), 0, std::min<std::size_t>(c.chunk_at.size(), 8), out);  // warm
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  const std::size_t n = c.chunk_at.size();
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { cpu_decode(c, kind, n * t / threads, n * (t + 1) / threads, out); });
  for (auto& th : pool) th.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(bytes_total) / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 512;
  int reps = 10;
  auto data_pattern = gpufeed_test::pattern::coarse_floats;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mib")) mib = std::strtoull(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--data"))
      data_pattern = !std::strcmp(argv[i + 1], "smooth") ? gpufeed_test::pattern::smooth_floats
                                                         : gpufeed_test::pattern::coarse_floats;
  }
  const std::size_t total = mib << 20;
  std::mt19937_64 rng(1);
  bytes data(total);
  for (std::size_t at = 0; at < total; at += data_chunk) {
    const bytes part = gpufeed_test::make_bytes(data_pattern, data_chunk, rng);
    std::memcpy(data.data() + at, part.data(), data_chunk);
  }
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::printf("%-22s %8s %7s %10s %10s %10s %10s %10s\n", "case", "units", "ratio", "gpu GB/s",
              "gpu in", "cpu 1 thr", "cpu all", "gpu/cpuall");
  // Deflate chunks of 128 KiB: what h5py's automatic chunks give 16 KiB rows.
  const struct { const char* name; int kind; std::size_t block, chunk; } cases[] = {
      {"lz4 64KiB blocks", 0, 65536, 1 << 20}, {"lz4 16KiB blocks", 0, 16384, 1 << 20},
      {"lz4 1MiB blocks", 0, 1 << 20, 1 << 20}, {"bitshuffle-lz4 8KiB", 1, 2048, 1 << 20},
      {"deflate L4, 128KiB", 2, 4, 128 << 10}, {"deflate L1, 128KiB", 2, 1, 128 << 10},
      {"shuffle+deflate L4", 3, 4, 128 << 10}};
  for (const auto& k : cases) {
    const chunked c = make_case(k.name, data, k.kind, k.block, k.chunk);
    gpufeed::cuda::device_buffer d_src(c.src.size()), d_dst(total),
        d_units(c.units.size() * sizeof(codec::gpu_unit)), d_status(c.units.size() * 4),
        d_stage(c.stage_bytes + 1);
    GPUFEED_CUDA_TRY(cudaMemcpy(d_src.data(), c.src.data(), c.src.size(), cudaMemcpyHostToDevice));
    GPUFEED_CUDA_TRY(cudaMemcpy(d_units.data(), c.units.data(),
                                c.units.size() * sizeof(codec::gpu_unit), cudaMemcpyHostToDevice));
    GPUFEED_CUDA_TRY(cudaMemset(d_dst.data(), 0, total));
    auto launch = [&] {
      cd::launch_decode_units(d_src.as<std::uint8_t>(), d_dst.as<std::uint8_t>(),
                              d_units.as<codec::gpu_unit>(),
                              static_cast<std::uint32_t>(c.units.size()), c.scratch,
                              d_status.as<std::uint32_t>(), nullptr,
                              c.stage_bytes ? d_stage.as<std::uint8_t>() : nullptr);
    };
    launch();
    GPUFEED_CUDA_TRY(cudaDeviceSynchronize());
    bytes back(total);
    std::vector<std::uint32_t> status(c.units.size());
    GPUFEED_CUDA_TRY(cudaMemcpy(back.data(), d_dst.data(), total, cudaMemcpyDeviceToHost));
    GPUFEED_CUDA_TRY(cudaMemcpy(status.data(), d_status.data(), status.size() * 4,
                                cudaMemcpyDeviceToHost));
    const bool right = back == data &&
                       std::all_of(status.begin(), status.end(), [](std::uint32_t s) { return s == 0; });
    cudaEvent_t a, b;
    GPUFEED_CUDA_TRY(cudaEventCreate(&a));
    GPUFEED_CUDA_TRY(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int r = 0; r < reps; ++r) {
      GPUFEED_CUDA_TRY(cudaEventRecord(a));
      launch();
      GPUFEED_CUDA_TRY(cudaEventRecord(b));
      GPUFEED_CUDA_TRY(cudaEventSynchronize(b));
      float t = 0;
      GPUFEED_CUDA_TRY(cudaEventElapsedTime(&t, a, b));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2] / 1e3;
    const double gpu = static_cast<double>(total) / med / 1e9;
    const double gpu_in = static_cast<double>(c.src.size()) / med / 1e9;
    const double cpu1 = cpu_rate(c, k.kind, total, 1);
    const double cpun = cpu_rate(c, k.kind, total, threads);
    std::printf("%-22s %8zu %7.2f %10.1f %10.1f %10.2f %10.2f %10.1f%s\n", k.name, c.units.size(),
                static_cast<double>(total) / static_cast<double>(c.src.size()), gpu, gpu_in, cpu1,
                cpun, gpu / cpun, right ? "" : "  WRONG OUTPUT");
    std::printf("json {\"case\":\"%s\",\"units\":%zu,\"decoded_bytes\":%zu,\"compressed_bytes\":%zu,"
                "\"gpu_gbps\":%.3f,\"cpu1_gbps\":%.3f,\"cpu_all_gbps\":%.3f,\"threads\":%u,\"right\":%s}\n",
                k.name, c.units.size(), total, c.src.size(), gpu, cpu1, cpun, threads,
                right ? "true" : "false");
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (!right) return 1;
  }
  return 0;
}
