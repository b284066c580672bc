// The GPU chunk decoders on a GPU: a batch of LZ4-, Bitshuffle- and deflate-filter chunks, and of
// h5py's gzip + shuffle (+ fletcher32) chunks, decoded by the kernel equals the CPU path byte for
// byte (a chunk whose fletcher32 does not match fails in the CPU path's words); corrupted and
// random units give exactly the statuses the host's emulated warp gives (the same parse), write
// nothing outside their own output and stage bytes, and leave no CUDA error behind.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "codec_data.hpp"
#include "filter_data.hpp"
#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/detail/codec/unit_kernels.cuh"
#include "gpufeed/detail/codec/lz4.hpp"

using namespace gpufeed_test;
namespace cd = gpufeed::cuda::detail;
namespace codec = gpufeed::detail::codec;

namespace {

// Runs the kernel over `units` of `src`, decoded into a buffer of `dst_size` bytes (with guard
// bytes after it that must stay untouched); returns the decoded bytes and the statuses.
struct device_result {
  bytes dst;
  std::vector<std::uint32_t> status;
};
device_result run_on_gpu(const bytes& src, std::size_t dst_size,
                         const std::vector<codec::gpu_unit>& units, std::size_t stage_size = 0) {
  constexpr std::size_t guard = 4096;
  gpufeed::cuda::device_buffer d_src(src.size() + 1), d_dst(dst_size + guard),
      d_units(units.size() * sizeof(codec::gpu_unit) + 1), d_status(units.size() * 4 + 4),
      d_stage(stage_size + guard);
  GPUFEED_CUDA_TRY(cudaMemset(d_stage.data(), 0xEE, stage_size + guard));
  GPUFEED_CUDA_TRY(cudaMemcpy(d_src.data(), src.data(), src.size(), cudaMemcpyHostToDevice));
  GPUFEED_CUDA_TRY(cudaMemset(d_dst.data(), 0xEE, dst_size + guard));
  GPUFEED_CUDA_TRY(cudaMemcpy(d_units.data(), units.data(), units.size() * sizeof(codec::gpu_unit),
                              cudaMemcpyHostToDevice));
  GPUFEED_CUDA_TRY(cudaMemset(d_status.data(), 0xFF, units.size() * 4 + 4));
  std::uint32_t scratch = 0;
  for (const auto& u : units)
    scratch = std::max(scratch, cd::unit_scratch_bytes(u));
  cd::launch_decode_units(d_src.as<std::uint8_t>(), d_dst.as<std::uint8_t>(),
                          d_units.as<codec::gpu_unit>(), static_cast<std::uint32_t>(units.size()),
                          scratch, d_status.as<std::uint32_t>(), nullptr,
                          stage_size ? d_stage.as<std::uint8_t>() : nullptr);
  GPUFEED_CUDA_TRY(cudaDeviceSynchronize());
  bytes stage_guard(guard);
  GPUFEED_CUDA_TRY(cudaMemcpy(stage_guard.data(), d_stage.as<std::uint8_t>() + stage_size, guard,
                              cudaMemcpyDeviceToHost));
  for (const std::uint8_t b : stage_guard) REQUIRE(b == 0xEE);
  device_result r;
  r.dst.resize(dst_size + guard);
  r.status.resize(units.size());
  GPUFEED_CUDA_TRY(cudaMemcpy(r.dst.data(), d_dst.data(), r.dst.size(), cudaMemcpyDeviceToHost));
  GPUFEED_CUDA_TRY(cudaMemcpy(r.status.data(), d_status.data(), units.size() * 4,
                              cudaMemcpyDeviceToHost));
  for (std::size_t i = dst_size; i < r.dst.size(); ++i) REQUIRE(r.dst[i] == 0xEE);
  r.dst.resize(dst_size);
  return r;
}

}  // namespace

TEST_CASE("a batch of LZ4, Bitshuffle and deflate chunks decodes on the GPU as on the CPU") {
  std::mt19937_64 rng(11);
  bytes src, expect;
  std::vector<codec::gpu_unit> units;
  int lz4_chunks = 0, bitshuffle_chunks = 0, deflate_chunks = 0;
  for (int c = 0; c < 128; ++c) {
    const pattern p = static_cast<pattern>(c % 5);
    const std::size_t n = 4 * (1000 + rng() % 70000);
    const bytes data = make_bytes(p, n, rng);
    bytes chunk;
    if (c >= 96) {
      chunk = zlib_compress(data, c % 10);
      REQUIRE(codec::plan_deflate_chunk(as_bytes(chunk), src.size(), expect.size(), n, units).ok);
      ++deflate_chunks;
    } else if (c % 3 == 2) {
      chunk = bitshuffle_chunk(data, 4, c % 2 ? 2048 : 512, c % 6 == 2 ? 0 : 2);
      REQUIRE(codec::plan_bitshuffle_chunk(as_bytes(chunk), src.size(), expect.size(), n, 4,
                                           c % 2 ? 2048 : 512, c % 6 == 2 ? 0 : 2, units)
                  .ok);
      ++bitshuffle_chunks;
    } else {
      chunk = lz4_filter_chunk(data, c % 2 ? 65536 : 16384);
      REQUIRE(codec::plan_lz4_chunk(as_bytes(chunk), src.size(), expect.size(), n, units).ok);
      ++lz4_chunks;
    }
    src.insert(src.end(), chunk.begin(), chunk.end());
    expect.insert(expect.end(), data.begin(), data.end());
  }
  const device_result r = run_on_gpu(src, expect.size(), units);
  for (std::size_t i = 0; i < units.size(); ++i) {
    INFO("unit " << i);
    CHECK(r.status[i] == 0u);
  }
  CHECK(r.dst == expect);
  CHECK(lz4_chunks == 64);
  CHECK(bitshuffle_chunks == 32);
  CHECK(deflate_chunks == 32);
}

TEST_CASE("corrupted and random LZ4 and deflate units: the GPU's statuses and bytes equal the emulated warp's") {
  std::mt19937_64 rng(12);
  bytes src;
  std::vector<codec::gpu_unit> units;
  std::uint64_t dst_at = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::size_t n = 1 + rng() % 5000;
    const bool deflate = i % 2 == 1;
    const bytes data = make_bytes(static_cast<pattern>(rng() % 5), n, rng);
    bytes z = deflate ? zlib_compress(data, static_cast<int>(rng() % 10)) : lz4_compress(data);
    switch (rng() % 4) {
      case 0: z[rng() % z.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255); break;
      case 1: z.resize(std::max<std::size_t>(1, rng() % z.size())); break;
      case 2: for (auto& b : z) b = static_cast<std::uint8_t>(rng()); break;
      default: break;
    }
    codec::gpu_unit u;
    u.kind = deflate ? codec::gpu_unit_kind::deflate : codec::gpu_unit_kind::lz4_block;
    u.src = src.size();
    u.src_size = static_cast<std::uint32_t>(z.size());
    u.dst = dst_at;
    u.dst_size = static_cast<std::uint32_t>(rng() % 8 ? n : n + rng() % 64);
    dst_at += u.dst_size;
    src.insert(src.end(), z.begin(), z.end());
    units.push_back(u);
  }
  bytes host_dst(dst_at, 0xEE);
  const auto host_status = host_decode_units(src, host_dst, units);
  const device_result r = run_on_gpu(src, dst_at, units);
  int refused = 0;
  for (std::size_t i = 0; i < units.size(); ++i) {
    INFO("unit " << i);
    REQUIRE(r.status[i] == static_cast<std::uint32_t>(host_status[i]));
    if (host_status[i] != cd::unit_status::ok) {
      ++refused;
      continue;
    }
    const auto at = static_cast<std::ptrdiff_t>(units[i].dst);
    CHECK(std::equal(host_dst.begin() + at, host_dst.begin() + at + units[i].dst_size,
                     r.dst.begin() + at));
  }
  CHECK(refused > 5000);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a batch of gzip + shuffle (+ fletcher32) chunks decodes on the GPU as on the CPU") {
  std::mt19937_64 rng(13);
  bytes src;
  std::vector<codec::gpu_unit> units;
  std::vector<filtered_chunk> chunks;
  std::vector<h5::gpu_chunk_plan> plans;
  std::vector<std::size_t> sizes, dst_at;
  std::uint64_t dst_size = 0, stage_size = 0;
  int corrupted = 0;
  for (int c = 0; c < 240; ++c) {
    const layout l = all_layouts[c % 6];
    const std::size_t e = std::size_t{1} << (c / 6 % 4);
    // whole elements, or a size that is not a multiple of the element size
    const std::size_t n = c % 5 == 4 ? 1 + rng() % 3000 : e * (1 + rng() % 60000);
    const bytes data = make_bytes(static_cast<pattern>(c % 5), n, rng);
    filtered_chunk chunk = make_chunk(data, l, e, 1 + c % 9);
    if (c % 17 == 5 && (l == layout::shuffle_deflate_fletcher || l == layout::deflate_fletcher)) {
      chunk.stored[rng() % chunk.stored.size()] ^= 0x10;  // the trailing checksum catches it
      ++corrupted;
    }
    if (c % 17 == 6 && (l == layout::fletcher_shuffle_deflate || l == layout::fletcher_deflate)) {
      bytes inner = with_fletcher32(data);  // a wrong checksum inside the stream
      inner[n] ^= 0x01;
      chunk.stored =
          zlib_compress(l == layout::fletcher_deflate ? inner : shuffle_bytes(inner, e), 4);
      ++corrupted;
    }
    const h5::gpu_chunk_plan p = h5::plan_gpu_chunk(chunk.pipeline, 0, as_bytes(chunk.stored), n,
                                                    src.size(), dst_size, stage_size, units);
    REQUIRE(p.status.ok);
    src.insert(src.end(), chunk.stored.begin(), chunk.stored.end());
    dst_at.push_back(dst_size);
    dst_size += n;
    stage_size += p.stage_bytes;
    sizes.push_back(n);
    plans.push_back(p);
    chunks.push_back(std::move(chunk));
  }
  REQUIRE(corrupted >= 4);
  const device_result r = run_on_gpu(src, dst_size, units, stage_size);
  bytes host_dst(dst_size, 0xEE), host_stage(stage_size);
  const auto host_status = host_decode_units(src, host_dst, units, host_stage.data());
  int refused = 0;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    INFO("chunk " << c);
    bytes cpu;
    const codec::result want = cpu_decode_chunk(chunks[c], 0, sizes[c], cpu);
    const std::span<const codec::gpu_unit> mine(units.data() + plans[c].first_unit,
                                                plans[c].unit_count);
    const std::span<const std::uint32_t> status(r.status.data() + plans[c].first_unit,
                                                plans[c].unit_count);
    for (std::size_t i = 0; i < plans[c].unit_count; ++i)
      CHECK(status[i] == static_cast<std::uint32_t>(host_status[plans[c].first_unit + i]));
    const codec::result got = cd::chunk_failure(mine, status);
    REQUIRE(got.ok == want.ok);
    if (!want.ok) {
      CHECK(got.message == want.message);
      CHECK(std::string(got.api) == want.api);
      ++refused;
      continue;
    }
    CHECK(std::equal(cpu.begin(), cpu.end(),
                     r.dst.begin() + static_cast<std::ptrdiff_t>(dst_at[c])));
  }
  CHECK(refused == corrupted);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("random staged, fletcher32 and unshuffle units: the GPU equals the emulated warp") {
  std::mt19937_64 rng(14);
  bytes src;
  std::vector<codec::gpu_unit> units;
  std::uint64_t dst_at = 0, stage_at = 0;
  for (int i = 0; i < 12000; ++i) {
    const std::size_t n = 1 + rng() % 5000;
    const std::uint32_t e = static_cast<std::uint32_t>(rng() % 10);
    const bytes data = make_bytes(static_cast<pattern>(rng() % 5), n, rng);
    codec::gpu_unit u;
    u.kind = static_cast<codec::gpu_unit_kind>(5 + i % 4);
    bytes z = u.kind == codec::gpu_unit_kind::deflate_unshuffle ||
                      u.kind == codec::gpu_unit_kind::deflate_fletcher32
                  ? zlib_compress(u.kind == codec::gpu_unit_kind::deflate_fletcher32
                                      ? with_fletcher32(data) : data,
                                  static_cast<int>(rng() % 10))
              : u.kind == codec::gpu_unit_kind::fletcher32 ? with_fletcher32(data)
                                                           : data;
    switch (rng() % 4) {
      case 0: z[rng() % z.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255); break;
      case 1: z.resize(std::max<std::size_t>(1, rng() % z.size())); break;
      default: break;
    }
    u.src = src.size();
    u.src_size = static_cast<std::uint32_t>(z.size());
    u.dst = dst_at;
    u.dst_size = u.kind == codec::gpu_unit_kind::fletcher32 ? 0
                 : u.kind == codec::gpu_unit_kind::unshuffle
                     ? u.src_size
                     : static_cast<std::uint32_t>(rng() % 8 ? n : n + rng() % 64);
    u.element_size = e;
    u.stage = stage_at;
    dst_at += u.dst_size;
    stage_at += codec::gpu_unit_stage_bytes(u);
    src.insert(src.end(), z.begin(), z.end());
    units.push_back(u);
  }
  bytes host_dst(dst_at, 0xEE), host_stage(stage_at);
  const auto host_status = host_decode_units(src, host_dst, units, host_stage.data());
  const device_result r = run_on_gpu(src, dst_at, units, stage_at);
  int refused = 0;
  for (std::size_t i = 0; i < units.size(); ++i) {
    INFO("unit " << i);
    REQUIRE(r.status[i] == static_cast<std::uint32_t>(host_status[i]));
    if (host_status[i] != cd::unit_status::ok) {
      ++refused;
      continue;
    }
    const auto at = static_cast<std::ptrdiff_t>(units[i].dst);
    CHECK(std::equal(host_dst.begin() + at, host_dst.begin() + at + units[i].dst_size,
                     r.dst.begin() + at));
  }
  CHECK(refused > 2000);
  CHECK(cudaGetLastError() == cudaSuccess);
}
