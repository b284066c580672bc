// The GPU inflater's decode (cuda/detail/codec/inflate.hpp) on the host through an emulated
// warp: zlib streams of every block type and level decode byte for byte as libdeflate (the CPU
// path) decodes them, and on corrupted streams it accepts exactly what libdeflate accepts.
#include <doctest/doctest.h>

#include <zlib.h>

#include <memory>
#include <random>
#include <string>

#include "codec_data.hpp"
#include "gpufeed/cuda/detail/codec/inflate.hpp"
#include "gpufeed/detail/codec/deflate.hpp"

using namespace gpufeed_test;
namespace cd = gpufeed::cuda::detail;
namespace codec = gpufeed::detail::codec;

namespace {

// zlib's deflate with a level and a strategy (Z_DEFAULT_STRATEGY, Z_FIXED, Z_HUFFMAN_ONLY,
// Z_RLE; level 0 writes stored blocks).
bytes zlib_compress(const bytes& in, int level, int strategy) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, level, Z_DEFLATED, 15, 8, strategy) == Z_OK);
  bytes out(deflateBound(&z, in.size()) + 16);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

cd::inflate_status warp_inflate(const bytes& in, bytes& out, unsigned width = 32) {
  auto tables = std::make_unique<cd::inflate_tables>();
  cd::emulated_inflate_warp warp;
  warp.width = width;
  return cd::inflate_zlib(in.data(), static_cast<std::uint32_t>(in.size()), out.data(),
                          static_cast<std::uint32_t>(out.size()), *tables, warp);
}

bool cpu_inflate(const bytes& in, bytes& out) {
  codec::deflate_decoder d;
  return d.decode({reinterpret_cast<const std::byte*>(in.data()), in.size()},
                  {reinterpret_cast<std::byte*>(out.data()), out.size()})
      .ok;
}

constexpr pattern all_patterns[] = {pattern::random, pattern::runs, pattern::smooth_floats,
                                    pattern::zeros, pattern::coarse_floats};

}  // namespace

TEST_CASE("an emulated warp inflates zlib streams byte for byte as libdeflate does") {
  std::mt19937_64 rng(21);
  int streams = 0;
  for (const pattern p : all_patterns)
    for (const std::size_t n : {1u, 100u, 5000u, 70000u, 300000u})
      for (const int level : {0, 1, 6, 9})
        for (const int strategy : {Z_DEFAULT_STRATEGY, Z_FIXED, Z_HUFFMAN_ONLY, Z_RLE}) {
          const bytes data = make_bytes(p, n, rng);
          const bytes z = zlib_compress(data, level, strategy);
          bytes out(n, 0xEE);
          INFO("pattern " << static_cast<int>(p) << ", " << n << " bytes, level " << level
                          << ", strategy " << strategy);
          REQUIRE(warp_inflate(z, out, streams % 3 ? 32 : 5) == cd::inflate_status::ok);
          CHECK(out == data);
          ++streams;
        }
  CHECK(streams == 5 * 5 * 4 * 4);
}

TEST_CASE("corrupted zlib streams: the warp inflater accepts exactly what libdeflate accepts") {
  std::mt19937_64 rng(22);
  int accepted = 0, refused = 0;
  const int rounds = 8000;
  for (int round = 0; round < rounds; ++round) {
    const pattern p = all_patterns[rng() % 5];
    const std::size_t n = 1 + rng() % 4000;
    const bytes data = make_bytes(p, n, rng);
    bytes z = zlib_compress(data, static_cast<int>(rng() % 10),
                            rng() % 2 ? Z_DEFAULT_STRATEGY : Z_FIXED);
    std::size_t size = n;
    switch (rng() % 7) {
      case 0:
      case 1:  // flip 1-3 bytes
        for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k)
          z[rng() % z.size()] ^= static_cast<std::uint8_t>(1 << (rng() % 8));
        break;
      case 2:  // truncate
        z.resize(rng() % z.size());
        break;
      case 3:  // bytes after the stream
        for (int k = 1 + static_cast<int>(rng() % 8); k > 0; --k)
          z.push_back(static_cast<std::uint8_t>(rng()));
        break;
      case 4:  // a decoded size that is off
        size = rng() % 2 ? n + 1 + rng() % 16 : n - std::min<std::size_t>(n, 1 + rng() % 16);
        break;
      case 5:  // garbage after a valid header
        for (std::size_t i = 2; i < z.size(); ++i) z[i] = static_cast<std::uint8_t>(rng());
        break;
      default:  // the Adler-32 off by one bit
        z[z.size() - 1 - rng() % 4] ^= static_cast<std::uint8_t>(1 << (rng() % 8));
        break;
    }
    bytes ref(size), out(size);
    const bool lib_ok = cpu_inflate(z, ref);
    const cd::inflate_status s = warp_inflate(z, out);
    INFO("round " << round << ": status " << static_cast<int>(s) << ", " << z.size()
                  << " bytes in, " << size << " of " << n << " out");
    REQUIRE((s == cd::inflate_status::ok) == lib_ok);
    if (lib_ok) {
      CHECK(out == ref);
      ++accepted;
    } else {
      ++refused;
    }
  }
  CHECK(accepted > 500);
  CHECK(refused > 3000);
}
