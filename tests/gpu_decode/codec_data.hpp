// Test data for the GPU chunk decoders: byte patterns with the matches LZ4 finds in real data,
// LZ4-filter and Bitshuffle-filter chunks written the way the HDF5 plugins write them, and a
// host decode of a chunk's units through the emulated warp (the reference the GPU must equal).
#pragma once

#include <lz4.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include "gpufeed/cuda/detail/codec/unit_decode.hpp"
#include "gpufeed/detail/codec/bitshuffle.hpp"
#include "gpufeed/detail/codec/gpu_units.hpp"

namespace gpufeed_test {

using bytes = std::vector<std::uint8_t>;

enum class pattern { random, runs, smooth_floats, zeros, coarse_floats };

// n bytes: random (incompressible), runs (short repeats at offsets 1-40: overlapping matches),
// smooth_floats (float32 of a slow wave quantised to 1/256, like measured data), zeros,
// coarse_floats (a wave in [0, 4) quantised to 1/256: few mantissa bits, so LZ4 alone finds
// about half the bytes in matches).
inline bytes make_bytes(pattern p, std::size_t n, std::mt19937_64& rng) {
  bytes out(n);
  switch (p) {
    case pattern::random:
      for (auto& b : out) b = static_cast<std::uint8_t>(rng());
      break;
    case pattern::runs:
      for (std::size_t i = 0; i < n;) {
        const std::size_t period = 1 + rng() % 40, len = 1 + rng() % 300;
        for (std::size_t k = 0; k < len && i < n; ++k, ++i)
          out[i] = i >= period && k >= period ? out[i - period] : static_cast<std::uint8_t>(rng());
      }
      break;
    case pattern::smooth_floats: {
      const double phase = static_cast<double>(rng() % 1000);
      for (std::size_t i = 0; i + 4 <= n; i += 4) {
        const double v = std::sin((phase + static_cast<double>(i / 4)) * 0.001) * 100.0;
        const float f = static_cast<float>(std::round(v * 256.0) / 256.0);
        std::memcpy(&out[i], &f, 4);
      }
      break;
    }
    case pattern::zeros:
      break;
    case pattern::coarse_floats: {
      const double phase = static_cast<double>(rng() % 1000);
      for (std::size_t i = 0; i + 4 <= n; i += 4) {
        const double v = (std::sin((phase + static_cast<double>(i / 4)) * 0.01) + 1.0) * 2.0;
        const float f = static_cast<float>(std::round(v * 256.0) / 256.0);
        std::memcpy(&out[i], &f, 4);
      }
      break;
    }
  }
  return out;
}

inline bytes lz4_compress(std::span<const std::uint8_t> in) {
  bytes out(static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(in.size()))) + 1);
  const int n = LZ4_compress_default(reinterpret_cast<const char*>(in.data()),
                                     reinterpret_cast<char*>(out.data()),
                                     static_cast<int>(in.size()), static_cast<int>(out.size()));
  if (n <= 0) throw std::runtime_error("LZ4_compress_default failed");
  out.resize(static_cast<std::size_t>(n));
  return out;
}

// A zlib stream of `in` at `level` (HDF5's deflate filter writes one per chunk).
inline bytes zlib_compress(std::span<const std::uint8_t> in, int level) {
  uLongf n = compressBound(static_cast<uLong>(in.size()));
  bytes out(n);
  if (compress2(out.data(), &n, in.data(), static_cast<uLong>(in.size()), level) != Z_OK)
    throw std::runtime_error("compress2 failed");
  out.resize(n);
  return out;
}

inline void put_be(bytes& out, std::uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// An LZ4-filter (32004) chunk of `data` in blocks of `block` bytes; blocks LZ4 cannot shrink
// stored raw, as H5Zlz4.c does.
inline bytes lz4_filter_chunk(std::span<const std::uint8_t> data, std::size_t block) {
  bytes out;
  put_be(out, data.size(), 8);
  put_be(out, block, 4);
  for (std::size_t at = 0; at < data.size(); at += block) {
    const auto part = data.subspan(at, std::min(block, data.size() - at));
    bytes z = lz4_compress(part);
    if (z.size() >= part.size()) z.assign(part.begin(), part.end());
    put_be(out, z.size(), 4);
    out.insert(out.end(), z.begin(), z.end());
  }
  return out;
}

// A Bitshuffle-filter (32008) chunk of `data` (elements of e bytes), blocks of `block` elements,
// compression 0 (none) or 2 (LZ4), as bshuf_h5filter.c writes it.
inline bytes bitshuffle_chunk(std::span<const std::uint8_t> data, std::size_t e, std::size_t block,
                              unsigned compression) {
  namespace codec = gpufeed::detail::codec;
  const std::size_t count = data.size() / e;
  bytes out;
  if (compression == 2) {
    put_be(out, data.size(), 8);
    put_be(out, block * e, 4);
  }
  std::size_t done = 0;
  for (std::size_t i = 0; i < count; i += block) {
    std::size_t n = std::min(block, count - i);
    n -= n % 8;
    if (n == 0) break;
    bytes t(n * e);
    codec::bit_transpose(reinterpret_cast<const std::byte*>(data.data() + done),
                         reinterpret_cast<std::byte*>(t.data()), n, e);
    if (compression == 2) {
      const bytes z = lz4_compress(t);
      put_be(out, z.size(), 4);
      out.insert(out.end(), z.begin(), z.end());
    } else {
      out.insert(out.end(), t.begin(), t.end());
    }
    done += n * e;
  }
  out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(done), data.end());
  return out;
}

inline std::span<const std::byte> as_bytes(const bytes& b) {
  return {reinterpret_cast<const std::byte*>(b.data()), b.size()};
}

// Decodes every unit on the host's emulated warp (the staged kinds through `stage`); the
// statuses, one per unit.
inline std::vector<gpufeed::cuda::detail::unit_status> host_decode_units(
    const bytes& src, bytes& dst, const std::vector<gpufeed::detail::codec::gpu_unit>& units,
    std::uint8_t* stage = nullptr) {
  gpufeed::cuda::detail::emulated_unit_warp warp;
  std::vector<gpufeed::cuda::detail::unit_status> status;
  for (const auto& u : units) {
    // Exactly what the unit may use: a write past it is a sanitizer report.
    bytes scratch(std::max<std::uint32_t>(gpufeed::cuda::detail::unit_scratch_bytes(u), 1));
    status.push_back(gpufeed::cuda::detail::decode_unit(src.data(), dst.data(), stage, u,
                                                        scratch.data(), warp));
  }
  return status;
}

}  // namespace gpufeed_test
