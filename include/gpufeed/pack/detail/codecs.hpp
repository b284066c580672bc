// gpufeed — pack(): compressing HDF5 chunks in the reading workers, in the exact stored formats
// of the filters HDF5 and the hdf5plugin plugins decode (part of gpufeed/pack/pack.hpp):
//
//   deflate (HDF5 filter 1)      a zlib stream (zlib's compress2: HDF5's own deflate filter)
//   lz4 (32004, H5Zlz4.c)        8 bytes big-endian chunk size, 4 bytes big-endian block size,
//                                then per block 4 bytes big-endian stored size and the LZ4 block
//                                (LZ4_compress_default, as the plugin), raw when LZ4 would not
//                                shrink it. Blocks of 64 KiB (lz4_pack_block; the plugin reads
//                                any block size from the header), cd_values {0}.
//   zstd (32015)                 one zstd frame with its content size (ZSTD_compress), which is
//                                what the Zstd plugin writes and reads; cd_values {level}.
//   bitshuffle-lz4 (32008)       bshuf_h5filter.c's format: 8 bytes big-endian chunk size, 4
//                                bytes big-endian block size in bytes, per block 4 bytes
//                                big-endian size and an LZ4 block of the bit-transposed block,
//                                then the count % 8 trailing elements raw. Blocks are bitshuffle's
//                                default (~8 KiB of elements). cd_values {0, 3, element size, 0,
//                                2}: format version 0.3, default block, LZ4.
// The codecs are Debian's zlib, liblz4 and libzstd; only bitshuffle's bit transpose is gpufeed's,
// because Debian ships bitshuffle as a Python module and an HDF5 plugin, not as a C library: the
// one in detail/codec/bitshuffle.hpp, whose decoder reads these chunks back.
#pragma once

#include <zlib.h>
#if defined(GPUFEED_PACK_HDF5)  // liblz4 and libzstd come with the hdf5 component
#include <lz4.h>
#include <zstd.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#if defined(GPUFEED_PACK_HDF5)
#include "gpufeed/detail/codec/bitshuffle.hpp"
#endif
#include "gpufeed/error.hpp"

namespace gpufeed::detail::pack {

enum class codec_kind { none, deflate, lz4, zstd, bitshuffle_lz4 };

inline constexpr unsigned lz4_filter_id = 32004, zstd_filter_id = 32015,
                          bitshuffle_filter_id = 32008;

// LZ4 block size of packed chunks: LZ4's own window (64 KiB), so blocks compress as well as one
// block per chunk would within a few percent, and a 1 MiB chunk gives a GPU 16 blocks to decode
// at once (docs/design.md, Pack: codecs, chunk shapes, order).
inline constexpr std::size_t lz4_pack_block = 64 * 1024;

// How a shard's chunks are compressed: the codec, its level (deflate 1-9, zstd 1-22; 0 for the
// others) and the element size bitshuffle transposes (the dataset's element size).
struct chunk_codec {
  codec_kind kind = codec_kind::none;
  int level = 0;
  std::size_t element_size = 1;
};

[[noreturn]] inline void codec_fail(const char* api, const std::string& what, int status = 0) {
  error_context ctx;
  ctx.api = api;
  ctx.status = status;
  ctx.status_text = what;
  throw library_error("cannot compress a chunk", std::move(ctx));
}

inline void put_be32(std::byte* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>((v >> (24 - 8 * i)) & 0xff);
}
inline void put_be64(std::byte* p, std::uint64_t v) noexcept {
  put_be32(p, static_cast<std::uint32_t>(v >> 32));
  put_be32(p + 4, static_cast<std::uint32_t>(v));
}

#if defined(GPUFEED_PACK_HDF5)
// One raw LZ4 block of src at dst (capacity LZ4_compressBound(src.size())); its size.
inline std::size_t lz4_block_encode(std::span<const std::byte> src, std::byte* dst) {
  const int n = LZ4_compress_default(reinterpret_cast<const char*>(src.data()),
                                     reinterpret_cast<char*>(dst), static_cast<int>(src.size()),
                                     LZ4_compressBound(static_cast<int>(src.size())));
  if (n <= 0 && !src.empty()) codec_fail("LZ4_compress_default", "LZ4 could not compress a block");
  return static_cast<std::size_t>(n);
}

#endif

// Compresses one whole chunk (already padded to the full chunk size) into `out`. Only HDF5
// shards are compressed: a program without the HDF5 writer has only `none` and deflate.
inline void encode_chunk(const chunk_codec& c, std::span<const std::byte> in,
                         std::vector<std::byte>& out) {
  switch (c.kind) {
    case codec_kind::none:
      out.assign(in.begin(), in.end());
      return;
    case codec_kind::deflate: {
      uLongf len = ::compressBound(static_cast<uLong>(in.size()));
      out.resize(len);
      const int rc = ::compress2(reinterpret_cast<Bytef*>(out.data()), &len,
                                 reinterpret_cast<const Bytef*>(in.data()),
                                 static_cast<uLong>(in.size()), c.level);
      if (rc != Z_OK) codec_fail("compress2", ::zError(rc), rc);
      out.resize(len);
      return;
    }
#if defined(GPUFEED_PACK_HDF5)
    case codec_kind::lz4: {
      // Blocks of lz4_pack_block bytes: each block decodes on its own, so a GPU decodes a
      // chunk's blocks side by side (one warp each) and a CPU reader loses nothing.
      const std::size_t block = std::min(in.size(), lz4_pack_block);
      const std::size_t blocks = block ? (in.size() + block - 1) / block : 0;
      const std::size_t bound =
          static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(block)));
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
      return;
    }
    case codec_kind::zstd: {
      thread_local std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> ctx(nullptr,
                                                                            ZSTD_freeCCtx);
      if (!ctx) ctx.reset(ZSTD_createCCtx());
      if (!ctx) codec_fail("ZSTD_createCCtx", "out of memory");
      out.resize(ZSTD_compressBound(in.size()));
      const std::size_t n =
          ZSTD_compressCCtx(ctx.get(), out.data(), out.size(), in.data(), in.size(), c.level);
      if (ZSTD_isError(n)) codec_fail("ZSTD_compressCCtx", ZSTD_getErrorName(n));
      out.resize(n);
      return;
    }
    case codec_kind::bitshuffle_lz4: {
      const std::size_t e = c.element_size, count = in.size() / e;
      const std::size_t block = codec::bitshuffle_default_block(e);
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
        codec::bit_transpose(in.data() + done, t.data(), n, e);
        const std::size_t z = lz4_block_encode({t.data(), n * e}, out.data() + at + 4);
        put_be32(out.data() + at, static_cast<std::uint32_t>(z));
        at += 4 + z;
        done += n * e;
      }
      const std::size_t left = in.size() - done;  // the count % 8 elements, stored raw
      std::memcpy(out.data() + at, in.data() + done, left);
      out.resize(at + left);
      return;
    }
#else
    default:
      codec_fail("encode_chunk", "this program has no HDF5 shard writer");
#endif
  }
}

}  // namespace gpufeed::detail::pack
