// gpufeed — one reader's decoders for the compressing filters of a chunk's pipeline, one codec
// each (detail/codec/), with the state each keeps between chunks (libdeflate's decompressor,
// zstd's context, bitshuffle's block scratch). Shuffle and fletcher32 are in filters.hpp.
#pragma once

#include <cstddef>
#include <span>

#include "gpufeed/detail/codec/bitshuffle.hpp"
#include "gpufeed/detail/codec/blosc.hpp"
#include "gpufeed/detail/codec/deflate.hpp"
#include "gpufeed/detail/codec/lz4.hpp"
#include "gpufeed/detail/codec/result.hpp"
#include "gpufeed/detail/codec/zstd.hpp"
#include "gpufeed/detail/hdf5/filter_step.hpp"

namespace gpufeed::detail::hdf5 {

// True for the filters whose stored size differs from their output (the output size is then
// the chunk's bytes plus the fletcher32 trailers applied before it).
inline bool compresses(const filter_step& f) noexcept {
  switch (f.kind) {
    case codec::kind::shuffle:
    case codec::kind::fletcher32:
      return false;
    case codec::kind::bitshuffle:
      return f.compression != codec::bitshuffle_mode::none;
    case codec::kind::none:
    case codec::kind::other:
      return false;  // no filter, or unknown: never decoded by gpufeed
    default:
      return true;
  }
}

class chunk_decoders {
 public:
  // Undoes filter f (not shuffle or fletcher32) from src into exactly dst.size() bytes.
  codec::result decode(const filter_step& f, std::span<const std::byte> src,
                       std::span<std::byte> dst) {
    switch (f.kind) {
      case codec::kind::deflate:
        return deflate_.decode(src, dst);
      case codec::kind::lz4:
        return codec::lz4_filter_decode(src, dst);
      case codec::kind::zstd:
        return zstd_.decode(src, dst);
      case codec::kind::blosc:
        return codec::blosc_filter_decode(src, dst);
      case codec::kind::bitshuffle:
        return bitshuffle_.decode(src, dst, f.element_size, f.block, f.compression);
      default:
        return codec::failed("filter pipeline", "not a decoding filter");
    }
  }

 private:
  codec::deflate_decoder deflate_;
  codec::zstd_decoder zstd_;
  codec::bitshuffle_decoder bitshuffle_;
};

}  // namespace gpufeed::detail::hdf5
