// gpufeed — pack(): compressing HDF5 chunks in the reading workers, in the exact stored formats
// of the filters HDF5 and the hdf5plugin plugins decode (part of gpufeed/pack/pack.hpp). The
// formats and their encoders are the codecs' own (detail/codec/<name>.hpp, whose decoders read
// these chunks back); here a pack_codec becomes a codec kind, and a chunk goes to its encoder:
//
//   deflate (HDF5 filter 1)      detail/codec/deflate.hpp: zlib's compress2, at the level
//   lz4 (32004)                  detail/codec/lz4.hpp: 64 KiB blocks (lz4_pack_block), cd {0}
//   zstd (32015)                 detail/codec/zstd.hpp: one frame with its size, cd {level}
//   bitshuffle-lz4 (32008)       detail/codec/bitshuffle.hpp: the default block, LZ4,
//                                cd {0, 3, element size, 0, 2}
// The codecs are Debian's zlib, liblz4 and libzstd (bitshuffle's bit transpose is gpufeed's).
// They come with the hdf5 component, so only a program with the HDF5 writer (GPUFEED_PACK_HDF5)
// includes them; one without it compresses nothing (LMDB shards are never compressed).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#if defined(GPUFEED_PACK_HDF5)  // zlib, liblz4 and libzstd come with the hdf5 component
#include "gpufeed/detail/codec/bitshuffle.hpp"
#include "gpufeed/detail/codec/deflate.hpp"
#include "gpufeed/detail/codec/lz4.hpp"
#include "gpufeed/detail/codec/zstd.hpp"
#endif
#include "gpufeed/detail/codec/encode_failure.hpp"
#include "gpufeed/detail/codec/kind.hpp"
#include "gpufeed/pack/pack_codec.hpp"

namespace gpufeed::detail::pack {

// The codec kind of a pack_codec: the one place the public enum meets the codecs'.
constexpr codec::kind kind_of(pack_codec c) noexcept {
  switch (c) {
    case pack_codec::none: return codec::kind::none;
    case pack_codec::deflate: return codec::kind::deflate;
    case pack_codec::lz4: return codec::kind::lz4;
    case pack_codec::zstd: return codec::kind::zstd;
    case pack_codec::bitshuffle_lz4: return codec::kind::bitshuffle;  // its LZ4 mode
  }
  return codec::kind::other;
}

// How a shard's chunks are compressed: the codec (none, deflate, lz4, zstd or bitshuffle in its
// LZ4 mode), its level (deflate 1-9, zstd 1-22; 0 for the others) and the element size
// bitshuffle transposes (the dataset's element size).
struct chunk_codec {
  codec::kind kind = codec::kind::none;
  int level = 0;
  std::size_t element_size = 1;
};

// Compresses one whole chunk (already padded to the full chunk size) into `out`. Only HDF5
// shards are compressed: a program without the HDF5 writer has only `none`.
inline void encode_chunk(const chunk_codec& c, std::span<const std::byte> in,
                         std::vector<std::byte>& out) {
  switch (c.kind) {
    case codec::kind::none:
      out.assign(in.begin(), in.end());
      return;
#if defined(GPUFEED_PACK_HDF5)
    case codec::kind::deflate:
      return codec::deflate_encode(in, c.level, out);
    case codec::kind::lz4:
      return codec::lz4_filter_encode(in, out);
    case codec::kind::zstd:
      return codec::zstd_encode(in, c.level, out);
    case codec::kind::bitshuffle:
      return codec::bitshuffle_lz4_encode(in, c.element_size, out);
    default:
      codec::encode_fail("encode_chunk", "not a codec gpufeed pack writes");
#else
    default:
      codec::encode_fail("encode_chunk", "this program has no HDF5 shard writer");
#endif
  }
}

}  // namespace gpufeed::detail::pack
