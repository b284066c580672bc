// gpufeed — the Blosc HDF5 filter (id 32001, hdf5-blosc), its one home: identity and CPU
// decoder. Each chunk is one Blosc buffer (its own 16-byte header says the compressor —
// blosclz, LZ4, Zstd, zlib... — and byte or bit shuffle, and its stored size: bytes after it are
// not part of it).
//   Decoder: libblosc's blosc_decompress_ctx, which is thread-safe and uses no global state; run
//            with one internal thread (the loader's workers are the parallelism).
//   Encoder: none (gpufeed pack does not write Blosc).
// GPU decoder: none (Blosc chunks are decoded on the CPU).
#pragma once

#include <blosc.h>

#include <cstddef>
#include <span>
#include <string>

#include "gpufeed/detail/codec/kind.hpp"
#include "gpufeed/detail/codec/result.hpp"

namespace gpufeed::detail::codec {

inline constexpr identity blosc_codec{kind::blosc, 32001, "blosc"};

inline result blosc_filter_decode(std::span<const std::byte> src, std::span<std::byte> dst) {
  if (src.size() < BLOSC_MIN_HEADER_LENGTH)
    return failed("blosc filter", "chunk shorter than the Blosc header");
  std::size_t nbytes = 0, cbytes = 0, blocksize = 0;
  blosc_cbuffer_sizes(src.data(), &nbytes, &cbytes, &blocksize);
  if (cbytes > src.size())
    return failed("blosc filter", "the Blosc header says " + std::to_string(cbytes) +
                                      " stored bytes, the chunk holds " +
                                      std::to_string(src.size()) + " (truncated?)");
  if (nbytes != dst.size())
    return failed("blosc filter", "the Blosc header says " + std::to_string(nbytes) +
                                      " bytes, expected " + std::to_string(dst.size()));
  // The header's sizes against the buffer (libblosc >= 1.16), which is the header's cbytes: bytes
  // after the Blosc buffer are ignored, as hdf5-blosc (and so h5py) ignores them.
  std::size_t checked = 0;
  if (blosc_cbuffer_validate(src.data(), cbytes, &checked) != 0 || checked != dst.size())
    return failed("blosc_cbuffer_validate", "invalid Blosc header");
  const int n = blosc_decompress_ctx(src.data(), dst.data(), dst.size(), 1);
  if (n < 0)
    return failed("blosc_decompress_ctx", "corrupt Blosc data (status " + std::to_string(n) + ")");
  if (static_cast<std::size_t>(n) != dst.size())
    return failed("blosc_decompress_ctx", "decoded " + std::to_string(n) + " bytes, expected " +
                                              std::to_string(dst.size()));
  return {};
}

}  // namespace gpufeed::detail::codec
