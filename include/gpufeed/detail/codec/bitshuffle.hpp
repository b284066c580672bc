// gpufeed — the Bitshuffle HDF5 filter (id 32008, kiyo-masui/bitshuffle's bshuf_h5filter.c), its
// one home: identity, CPU decoder (none, LZ4 and Zstd modes), CPU encoder (LZ4 mode, gpufeed
// pack: cd_values {0, 3, element size, 0, 2}, format version 0.3, the default block, LZ4).
// Debian ships bitshuffle only as a Python module and an HDF5 plugin, not as a C library, so the
// bit transpose is done here, both ways (the encoder uses the forward one).
// GPU decoder: include/gpufeed/cuda/detail/codec/unit_decode.hpp (none and LZ4 modes: one block
// per warp, untransposed there, its LZ4 through cuda/detail/codec/lz4_block.hpp; units planned by
// detail/codec/gpu_units.hpp). The Zstd mode is decoded on the CPU.
//
// cd_values: [2] element size e, [3] block size in elements (0: the default below), [4]
// compression (0 none, 2 LZ4, 3 Zstd). The data is cut into blocks of `block` elements; the last
// partial block is cut down to a multiple of 8 elements and the (count % 8) elements left over are
// stored as they are, after the blocks. Within a block of n elements (n % 8 == 0) the stored bytes
// are 8e rows of n/8 bytes: row 8b + k holds bit k of byte b of each element, element i at bit
// (i % 8) of byte i / 8.
//   no compression: the blocks as above, nothing else (same size as the data);
//   LZ4 / Zstd:     8 bytes big-endian total size, 4 bytes big-endian block size in BYTES, then
//                   per block 4 bytes big-endian compressed size and an LZ4 block / zstd frame of
//                   the transposed block, then the leftover elements raw.
// Debian's plugin (bitshuffle 0.3, built without Zstd) compresses only for code 2 and treats
// every other code as "no compression", reading and writing alike: a file h5py writes through it
// in Zstd mode (code 3) stores each chunk uncompressed, the same size as the data, and that
// plugin reads it back so. Such a chunk (stored size == data size, no valid Zstd-mode header) is
// read here as that plugin reads it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/codec/bit_matrix.hpp"
#include "gpufeed/detail/codec/encode_failure.hpp"
#include "gpufeed/detail/codec/kind.hpp"
#include "gpufeed/detail/codec/lz4.hpp"
#include "gpufeed/detail/codec/result.hpp"
#include "gpufeed/detail/codec/zstd.hpp"

namespace gpufeed::detail::codec {

inline constexpr identity bitshuffle_codec{kind::bitshuffle, 32008, "bitshuffle"};

// cd_values[4], the compression of the blocks.
namespace bitshuffle_mode {
inline constexpr unsigned none = 0, lz4 = 2, zstd = 3;
}  // namespace bitshuffle_mode

// The filter's name with its compression, as descriptions and messages give it.
constexpr const char* bitshuffle_name(unsigned compression) noexcept {
  return compression == bitshuffle_mode::lz4    ? "bitshuffle(lz4)"
         : compression == bitshuffle_mode::zstd ? "bitshuffle(zstd)"
                                          : "bitshuffle";
}

// bitshuffle's bshuf_default_block_size: ~8 KiB of elements, a multiple of 8, at least 128.
inline std::size_t bitshuffle_default_block(std::size_t element_size) noexcept {
  const std::size_t b = (8192 / element_size) / 8 * 8;
  return b < 128 ? 128 : b;
}

// bitshuffle's bit transpose of one block of n elements (n % 8 == 0) of e bytes, in the element
// order (element i at i x e) or the row order above (row r at r x n/8). Byte b of elements
// 8q .. 8q+7 and byte q of rows 8b .. 8b+7 hold the same 64 bits as an 8x8 bit matrix and its
// transpose; that transpose is its own inverse, so both directions are one loop with the
// source's and the destination's sides swapped. to_rows: src is in element order (pack's encoder);
// else src is in row order (the decoder below).
template <bool to_rows>
inline void bit_transpose_block(const std::byte* src, std::byte* dst, std::size_t n,
                                std::size_t e) noexcept {
  const std::size_t row = n / 8;
  const std::size_t src_step = to_rows ? e : row, dst_step = to_rows ? row : e;
  for (std::size_t b = 0; b < e; ++b) {
    for (std::size_t q = 0; q < row; ++q) {
      const std::size_t rows_at = b * 8 * row + q, elements_at = 8 * q * e + b;
      const std::byte* in = src + (to_rows ? elements_at : rows_at);
      std::byte* out = dst + (to_rows ? rows_at : elements_at);
      std::uint64_t x = 0;
      for (int k = 0; k < 8; ++k)
        x |= std::uint64_t{static_cast<unsigned char>(in[k * src_step])} << (8 * k);
      x = transpose_8x8_bits(x);
      for (int k = 0; k < 8; ++k) out[k * dst_step] = static_cast<std::byte>((x >> (8 * k)) & 0xff);
    }
  }
}

// Element order to row order: what the filter stores (gpufeed pack's bitshuffle-lz4 encoder).
inline void bit_transpose(const std::byte* src, std::byte* dst, std::size_t n,
                          std::size_t e) noexcept {
  bit_transpose_block<true>(src, dst, n, e);
}

// Row order back to element order: undoes the filter's transpose.
inline void bit_untranspose(const std::byte* src, std::byte* dst, std::size_t n,
                            std::size_t e) noexcept {
  bit_transpose_block<false>(src, dst, n, e);
}

// One per reader: the scratch block for compressed modes and the zstd context.
class bitshuffle_decoder {
 public:
  result decode(std::span<const std::byte> src, std::span<std::byte> dst, std::size_t e,
                std::size_t block, unsigned compression) {
    if (e == 0) return failed("bitshuffle filter", "element size 0 in the filter's parameters");
    if (dst.size() % e)
      return failed("bitshuffle filter", "chunk of " + std::to_string(dst.size()) +
                                             " bytes is not a whole number of elements");
    const std::size_t count = dst.size() / e;
    if (compression == bitshuffle_mode::none) {
      if (src.size() != dst.size())
        return failed("bitshuffle filter", "stored " + std::to_string(src.size()) +
                                               " bytes, expected " + std::to_string(dst.size()));
      if (block == 0) block = bitshuffle_default_block(e);
      if (block % 8) return failed("bitshuffle filter", "block size not a multiple of 8");
      std::size_t at = 0;
      for (std::size_t i = 0; i < count; i += block) {
        std::size_t n = count - i < block ? count - i : block;
        n -= n % 8;
        bit_untranspose(src.data() + at, dst.data() + at, n, e);
        at += n * e;
      }
      std::memcpy(dst.data() + at, src.data() + at, dst.size() - at);
      return {};
    }
    if (compression != bitshuffle_mode::lz4 && compression != bitshuffle_mode::zstd)
      return failed("bitshuffle filter", "unknown compression " + std::to_string(compression));
    const result r = decode_compressed(src, dst, e, compression);
    if (!r.ok && !r.library_failed && compression == bitshuffle_mode::zstd &&
        src.size() == dst.size())
      return decode(src, dst, e, block, bitshuffle_mode::none);  // Debian's plugin's Zstd mode
    return r;
  }

 private:
  // The LZ4 / Zstd modes: header, compressed blocks, leftover elements.
  result decode_compressed(std::span<const std::byte> src, std::span<std::byte> dst,
                           std::size_t e, unsigned compression) {
    const std::size_t count = dst.size() / e;
    std::size_t block = 0;
    if (src.size() < 12) return failed("bitshuffle filter", "chunk shorter than its header");
    const std::uint64_t total = read_be64(src.data());
    const std::size_t block_bytes = read_be32(src.data() + 8);
    if (total != dst.size())
      return failed("bitshuffle filter", "header says " + std::to_string(total) +
                                             " bytes, expected " + std::to_string(dst.size()));
    block = block_bytes / e;
    if (block_bytes % e || block == 0 || block % 8)
      return failed("bitshuffle filter",
                    "header block size " + std::to_string(block_bytes) + " is not valid");
    std::size_t at = 12, out = 0;
    for (std::size_t i = 0; i < count; i += block) {
      std::size_t n = count - i < block ? count - i : block;
      n -= n % 8;
      if (n == 0) break;
      if (src.size() - at < 4) return failed("bitshuffle filter", "truncated before a block");
      const std::size_t c = read_be32(src.data() + at);
      at += 4;
      if (c > src.size() - at)
        return failed("bitshuffle filter", "a block runs past the end of the chunk");
      const std::span<std::byte> t = block_scratch(n * e);
      const result r = compression == bitshuffle_mode::lz4 ? lz4_block(src.subspan(at, c), t)
                                                     : zstd_.decode(src.subspan(at, c), t);
      if (!r.ok) return r;
      bit_untranspose(t.data(), dst.data() + out, n, e);
      at += c;
      out += n * e;
    }
    const std::size_t left = dst.size() - out;  // the count % 8 elements stored raw
    if (src.size() - at < left)
      return failed("bitshuffle filter", "truncated in the trailing elements");
    std::memcpy(dst.data() + out, src.data() + at, left);
    return {};
  }

  std::span<std::byte> block_scratch(std::size_t n) {
    if (n > capacity_) {
      scratch_.reset(new std::byte[n]);
      capacity_ = n;
    }
    return {scratch_.get(), n};
  }
  std::unique_ptr<std::byte[]> scratch_;
  std::size_t capacity_ = 0;
  zstd_decoder zstd_;
};

// Encoder, LZ4 mode: the format above, 8 bytes big-endian chunk size, 4 bytes big-endian block
// size in bytes, per block 4 bytes big-endian size and an LZ4 block of the bit-transposed block,
// then the count % 8 trailing elements raw; blocks of bitshuffle_default_block(e) elements.
inline void bitshuffle_lz4_encode(std::span<const std::byte> in, std::size_t e,
                                  std::vector<std::byte>& out) {
  const std::size_t count = in.size() / e;
  const std::size_t block = bitshuffle_default_block(e);
  const std::size_t bound =
      static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(block * e)));
  out.resize(12 + (count / block + 1) * (4 + bound) + in.size() % (8 * e) + 8 * e);
  put_be64(out.data(), in.size());
  put_be32(out.data() + 8, static_cast<std::uint32_t>(block * e));
  std::vector<std::byte> t(block * e);
  std::size_t at = 12, done = 0;
  for (std::size_t i = 0; i < count; i += block) {
    std::size_t n = count - i < block ? count - i : block;
    n -= n % 8;
    if (n == 0) break;
    bit_transpose(in.data() + done, t.data(), n, e);
    const std::size_t z = lz4_block_encode({t.data(), n * e}, out.data() + at + 4);
    put_be32(out.data() + at, static_cast<std::uint32_t>(z));
    at += 4 + z;
    done += n * e;
  }
  const std::size_t left = in.size() - done;  // the count % 8 elements, stored raw
  std::memcpy(out.data() + at, in.data() + done, left);
  out.resize(at + left);
}

}  // namespace gpufeed::detail::codec
