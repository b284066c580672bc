// gpufeed — the HDF5 LZ4 filter (id 32004, HDF5-External-Filter-Plugins' H5Zlz4.c), its one
// home: identity, CPU decoder, CPU encoder. A chunk is:
//   8 bytes  big-endian total decoded size
//   4 bytes  big-endian block size B (a block larger than the total means one block)
//   blocks:  4 bytes big-endian compressed size c, then c bytes; each block decodes to
//            min(B, bytes left). A block whose c equals that size is stored raw.
//   Decoder: liblz4's bounds-checked LZ4_decompress_safe.
//   Encoder: LZ4_compress_default per block, as the plugin, a block raw when LZ4 would not
//            shrink it; blocks of lz4_pack_block (the plugin reads any block size from the
//            header), cd_values {0} (gpufeed pack).
// GPU decoder: include/gpufeed/cuda/detail/codec/lz4_block.hpp (one block per warp; its units are
// planned by detail/codec/gpu_units.hpp and run by cuda/detail/codec/unit_decode.hpp).
#pragma once

#include <lz4.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/codec/encode_failure.hpp"
#include "gpufeed/detail/codec/kind.hpp"
#include "gpufeed/detail/codec/result.hpp"

namespace gpufeed::detail::codec {

inline constexpr identity lz4_codec{kind::lz4, 32004, "lz4"};

// LZ4 block size of packed chunks: LZ4's own window (64 KiB), so blocks compress as well as one
// block per chunk would within a few percent, and a 1 MiB chunk gives a GPU 16 blocks to decode
// at once (docs/design.md, Pack: codecs, chunk shapes, order).
inline constexpr std::size_t lz4_pack_block = 64 * 1024;

// One raw LZ4 block of exactly dst.size() bytes.
inline result lz4_block(std::span<const std::byte> src, std::span<std::byte> dst) {
  constexpr std::size_t most = static_cast<std::size_t>(std::numeric_limits<int>::max());
  if (src.size() > most || dst.size() > most)
    return failed("LZ4_decompress_safe", "an LZ4 block larger than 2 GiB");
  const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(src.data()),
                                    reinterpret_cast<char*>(dst.data()),
                                    static_cast<int>(src.size()), static_cast<int>(dst.size()));
  if (n < 0) return failed("LZ4_decompress_safe", "corrupt LZ4 block");
  if (static_cast<std::size_t>(n) != dst.size())
    return failed("LZ4_decompress_safe", "an LZ4 block holds " + std::to_string(n) +
                                             " bytes, expected " + std::to_string(dst.size()));
  return {};
}

// Decodes one chunk of the LZ4 filter into exactly dst.size() bytes.
inline result lz4_filter_decode(std::span<const std::byte> src, std::span<std::byte> dst) {
  if (src.size() < 12) return failed("lz4 filter", "chunk shorter than the 12-byte LZ4 header");
  const std::uint64_t total = read_be64(src.data());
  std::uint64_t block = read_be32(src.data() + 8);
  if (total != dst.size())
    return failed("lz4 filter", "header says " + std::to_string(total) + " bytes, expected " +
                                    std::to_string(dst.size()));
  if (block > total) block = total;
  if (block == 0 && total != 0) return failed("lz4 filter", "header gives a zero block size");
  std::size_t at = 12, out = 0;
  while (out < total) {
    const std::size_t want = static_cast<std::size_t>(block < total - out ? block : total - out);
    if (src.size() - at < 4) return failed("lz4 filter", "chunk truncated before a block header");
    const std::size_t c = read_be32(src.data() + at);
    at += 4;
    if (c > src.size() - at)
      return failed("lz4 filter", "a block of " + std::to_string(c) + " bytes runs past the chunk");
    if (c == want) {
      std::memcpy(dst.data() + out, src.data() + at, want);
    } else if (const result r = lz4_block(src.subspan(at, c), dst.subspan(out, want)); !r.ok) {
      return r;
    }
    at += c;
    out += want;
  }
  return {};
}

// Encoder: one raw LZ4 block of src at dst (capacity LZ4_compressBound(src.size())); its size.
inline std::size_t lz4_block_encode(std::span<const std::byte> src, std::byte* dst) {
  const int n = LZ4_compress_default(reinterpret_cast<const char*>(src.data()),
                                     reinterpret_cast<char*>(dst), static_cast<int>(src.size()),
                                     LZ4_compressBound(static_cast<int>(src.size())));
  if (n <= 0 && !src.empty())
    encode_fail("LZ4_compress_default", "LZ4 could not compress a block");
  return static_cast<std::size_t>(n);
}

// Encoder: one chunk of the LZ4 filter into `out`, in blocks of lz4_pack_block bytes: each block
// decodes on its own, so a GPU decodes a chunk's blocks side by side (one warp each) and a CPU
// reader loses nothing.
inline void lz4_filter_encode(std::span<const std::byte> in, std::vector<std::byte>& out) {
  const std::size_t block = std::min(in.size(), lz4_pack_block);
  const std::size_t blocks = block ? (in.size() + block - 1) / block : 0;
  const std::size_t bound = static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(block)));
  out.resize(12 + blocks * (4 + std::max(bound, block)));
  put_be64(out.data(), in.size());
  put_be32(out.data() + 8, static_cast<std::uint32_t>(block));
  std::size_t at = 12;
  for (std::size_t done = 0; done < in.size(); done += block) {
    const std::span<const std::byte> part = in.subspan(done, std::min(block, in.size() - done));
    std::size_t n = lz4_block_encode(part, out.data() + at + 4);
    if (n >= part.size()) {  // the plugin stores a block LZ4 cannot shrink as it is
      std::memcpy(out.data() + at + 4, part.data(), part.size());
      n = part.size();
    }
    put_be32(out.data() + at, static_cast<std::uint32_t>(n));
    at += 4 + n;
  }
  out.resize(at);
}

}  // namespace gpufeed::detail::codec
