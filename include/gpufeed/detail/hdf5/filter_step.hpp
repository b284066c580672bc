// gpufeed — one step of a chunked dataset's filter pipeline, as gpufeed knows it.
#pragma once

#include <cstddef>

namespace gpufeed::detail::hdf5 {

// The filters gpufeed decodes itself (chunk_decoders.hpp): HDF5's own, and the plugin filters
// h5py + hdf5plugin write (Blosc 32001, LZ4 32004, Bitshuffle 32008, Zstd 32015). `other`: a
// filter gpufeed does not decode (such a shard is read through H5Dread; the step keeps the
// pipeline's positions, which chunk filter masks count).
enum class filter_kind { deflate, shuffle, fletcher32, lz4, bitshuffle, blosc, zstd, other };
struct filter_step {
  filter_kind kind = filter_kind::deflate;
  std::size_t element_size = 0;  // shuffle, bitshuffle: the element size it was applied with
  std::size_t block = 0;         // bitshuffle: block size in elements (0: its default)
  unsigned compression = 0;      // bitshuffle: 0 none, 2 LZ4, 3 Zstd
};

}  // namespace gpufeed::detail::hdf5
