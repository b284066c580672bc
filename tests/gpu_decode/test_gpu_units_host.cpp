// The GPU chunk decoders' parse, planning and index arithmetic, run on the host through an
// emulated warp (no GPU needed): LZ4 blocks against liblz4 (the CPU path's decoder) on valid and
// corrupted blocks, and the units of LZ4- and Bitshuffle-filter chunks against the CPU filter
// decoders, byte for byte.
#include <doctest/doctest.h>

#include <lz4.h>

#include <random>

#include "codec_data.hpp"
#include "gpufeed/detail/codec/lz4.hpp"

using namespace gpufeed_test;
namespace cd = gpufeed::cuda::detail;
namespace codec = gpufeed::detail::codec;

namespace {

cd::unit_status warp_decode(const bytes& in, bytes& out, unsigned width) {
  cd::emulated_warp warp{width};
  return cd::lz4_decode_block(in.data(), static_cast<std::uint32_t>(in.size()), out.data(),
                              static_cast<std::uint32_t>(out.size()), warp);
}

// liblz4's answer for a block that must decode to exactly `size` bytes.
bool liblz4_decode(const bytes& in, bytes& out) {
  const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data()),
                                    reinterpret_cast<char*>(out.data()),
                                    static_cast<int>(in.size()), static_cast<int>(out.size()));
  return n >= 0 && static_cast<std::size_t>(n) == out.size();
}

constexpr pattern all_patterns[] = {pattern::random, pattern::runs, pattern::smooth_floats,
                                    pattern::zeros};

}  // namespace

TEST_CASE("an emulated warp decodes LZ4 blocks byte for byte as liblz4 does") {
  std::mt19937_64 rng(1);
  int blocks = 0;
  for (const pattern p : all_patterns)
    for (const std::size_t n : {1u, 5u, 12u, 13u, 17u, 100u, 4096u, 65536u, 200000u})
      for (const unsigned width : {1u, 7u, 32u}) {
        const bytes data = make_bytes(p, n, rng);
        const bytes z = lz4_compress(data);
        bytes out(n, 0xEE);
        REQUIRE(warp_decode(z, out, width) == cd::unit_status::ok);
        CHECK(out == data);
        ++blocks;
      }
  CHECK(blocks == 4 * 9 * 3);
}

TEST_CASE("corrupted LZ4 blocks: the warp decoder accepts exactly what liblz4 accepts") {
  std::mt19937_64 rng(2);
  int cases = 0, accepted = 0, refused = 0;
  for (int round = 0; round < 20000; ++round) {
    const pattern p = all_patterns[rng() % 4];
    const std::size_t n = 1 + rng() % 3000;
    const bytes data = make_bytes(p, n, rng);
    bytes z = lz4_compress(data);
    std::size_t size = n;
    switch (rng() % 6) {
      case 0:
      case 1:  // flip 1-3 bytes
        for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k)
          z[rng() % z.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
        break;
      case 2:  // truncate
        z.resize(rng() % z.size());
        break;
      case 3:  // bytes after the block
        for (int k = 1 + static_cast<int>(rng() % 8); k > 0; --k)
          z.push_back(static_cast<std::uint8_t>(rng()));
        break;
      case 4:  // a decoded size that is off
        size = rng() % 2 ? n + 1 + rng() % 16 : n - std::min<std::size_t>(n, 1 + rng() % 16);
        break;
      default:  // garbage
        for (auto& b : z) b = static_cast<std::uint8_t>(rng());
        break;
    }
    bytes ref(size), out(size);
    const bool lib_ok = liblz4_decode(z, ref);
    const cd::unit_status s = warp_decode(z, out, 32);
    INFO("round " << round << ": " << std::string(cd::to_string(s)) << ", block " << z.size() << " bytes, size " << size << " of " << n);
    REQUIRE((s == cd::unit_status::ok) == lib_ok);
    if (lib_ok) {
      CHECK(out == ref);
      ++accepted;
    } else {
      ++refused;
    }
    ++cases;
  }
  CHECK(cases == 20000);
  CHECK(accepted > 100);
  CHECK(refused > 1000);
}

TEST_CASE("LZ4-filter chunks: their units decode to what the CPU filter decoder gives") {
  std::mt19937_64 rng(3);
  for (const pattern p : all_patterns)
    for (const std::size_t block : {4096u, 65536u, 1u << 20})
      for (const std::size_t n : {1000u, 65536u, 300001u}) {
        const bytes data = make_bytes(p, n, rng);
        const bytes chunk = lz4_filter_chunk(data, block);
        std::vector<codec::gpu_unit> units;
        const std::uint64_t src_base = 7, dst_base = 3;  // units name offsets in larger buffers
        bytes src(src_base, 0);
        src.insert(src.end(), chunk.begin(), chunk.end());
        REQUIRE(codec::plan_lz4_chunk(as_bytes(chunk), src_base, dst_base, n, units).ok);
        CHECK(units.size() == (n + std::min(block, n) - 1) / std::min(block, n));
        bytes dst(dst_base + n, 0xEE);
        for (const cd::unit_status s : host_decode_units(src, dst, units))
          CHECK(s == cd::unit_status::ok);
        bytes cpu(n);
        REQUIRE(codec::lz4_filter_decode(as_bytes(chunk), {reinterpret_cast<std::byte*>(cpu.data()), n}).ok);
        CHECK(bytes(dst.begin() + dst_base, dst.end()) == cpu);
        CHECK(cpu == data);
      }
}

TEST_CASE("LZ4-filter chunks the CPU decoder refuses are refused by the planner, in its words") {
  std::mt19937_64 rng(4);
  const bytes data = make_bytes(pattern::runs, 10000, rng);
  const bytes chunk = lz4_filter_chunk(data, 4096);
  std::vector<codec::gpu_unit> units;
  for (const std::size_t cut : {0u, 5u, 11u, 12u, 15u, 20u}) {
    const bytes part(chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(cut));
    const codec::result r = codec::plan_lz4_chunk(as_bytes(part), 0, 0, 10000, units);
    CHECK_FALSE(r.ok);
    bytes cpu(10000);
    const codec::result c =
        codec::lz4_filter_decode(as_bytes(part), {reinterpret_cast<std::byte*>(cpu.data()), cpu.size()});
    CHECK_FALSE(c.ok);
    CHECK(r.message == c.message);
  }
  CHECK_FALSE(codec::plan_lz4_chunk(as_bytes(chunk), 0, 0, 10001, units).ok);  // size mismatch
}

TEST_CASE("Bitshuffle chunks (none and LZ4): their units decode to what the CPU decoder gives") {
  std::mt19937_64 rng(5);
  int chunks = 0;
  for (const std::size_t e : {1u, 2u, 4u, 8u})
    for (const std::size_t count : {8u, 13u, 2048u, 10007u})
      for (const std::size_t block : {0u, 64u, 2048u})
        for (const unsigned compression : {0u, 2u}) {
          const std::size_t b = block ? block : codec::bitshuffle_default_block(e);
          const bytes data = make_bytes(pattern::smooth_floats, count * e, rng);
          const bytes chunk = bitshuffle_chunk(data, e, b, compression);
          std::vector<codec::gpu_unit> units;
          REQUIRE(codec::plan_bitshuffle_chunk(as_bytes(chunk), 0, 0, data.size(), e, block,
                                               compression, units)
                      .ok);
          bytes dst(data.size(), 0xEE);
          for (const cd::unit_status s : host_decode_units(chunk, dst, units))
            CHECK(s == cd::unit_status::ok);
          codec::bitshuffle_decoder cpu_decoder;
          bytes cpu(data.size());
          REQUIRE(cpu_decoder
                      .decode(as_bytes(chunk), {reinterpret_cast<std::byte*>(cpu.data()), cpu.size()},
                              e, block, compression)
                      .ok);
          CHECK(dst == cpu);
          CHECK(cpu == data);
          ++chunks;
        }
  CHECK(chunks == 4 * 4 * 3 * 2);
}

TEST_CASE("Bitshuffle chunks the GPU cannot take are refused by the planner") {
  std::vector<codec::gpu_unit> units;
  const bytes chunk(64, 0);
  CHECK_FALSE(codec::plan_bitshuffle_chunk(as_bytes(chunk), 0, 0, 64, 0, 0, 2, units).ok);
  CHECK_FALSE(codec::plan_bitshuffle_chunk(as_bytes(chunk), 0, 0, 64, 4, 0, 3, units).ok);  // zstd
  CHECK_FALSE(codec::plan_bitshuffle_chunk(as_bytes(chunk), 0, 0, 64, 4, 0, 7, units).ok);
  std::mt19937_64 rng(6);
  const bytes data = make_bytes(pattern::smooth_floats, 4 * 40000, rng);
  const bytes big = bitshuffle_chunk(data, 4, 32768, 2);  // 128 KiB blocks
  const codec::result r =
      codec::plan_bitshuffle_chunk(as_bytes(big), 0, 0, data.size(), 4, 32768, 2, units);
  CHECK_FALSE(r.ok);
  CHECK(r.message.find("larger than the GPU decoder takes") != std::string::npos);
}

TEST_CASE("a corrupt LZ4 block inside a Bitshuffle unit is a status, not a stray write") {
  std::mt19937_64 rng(7);
  const bytes data = make_bytes(pattern::smooth_floats, 4 * 4096, rng);
  bytes chunk = bitshuffle_chunk(data, 4, 2048, 2);
  std::vector<codec::gpu_unit> units;
  REQUIRE(codec::plan_bitshuffle_chunk(as_bytes(chunk), 0, 0, data.size(), 4, 2048, 2, units).ok);
  REQUIRE(units.size() == 2);
  int refused = 0;
  for (int round = 0; round < 300; ++round) {
    bytes bad = chunk;
    const auto& u = units[round % 2];
    for (int k = 0; k < 3; ++k) bad[u.src + rng() % u.src_size] = static_cast<std::uint8_t>(rng());
    bytes dst(data.size());
    const auto status = host_decode_units(bad, dst, units);
    if (status[round % 2] != cd::unit_status::ok) ++refused;
  }
  CHECK(refused > 150);
}
