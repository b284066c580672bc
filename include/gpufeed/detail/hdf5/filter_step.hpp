// gpufeed — one step of a chunked dataset's filter pipeline, as gpufeed knows it.
#pragma once

#include <cstddef>

#include "gpufeed/detail/codec/kind.hpp"

namespace gpufeed::detail::hdf5 {

// kind: the filter (detail/codec/kind.hpp; the ids and names are in detail/codec/registry.hpp).
// `other` for a filter gpufeed does not decode: such a shard is read through H5Dread, and the
// step keeps the pipeline's positions, which chunk filter masks count.
struct filter_step {
  codec::kind kind = codec::kind::deflate;
  std::size_t element_size = 0;  // shuffle, bitshuffle: the element size it was applied with
  std::size_t block = 0;         // bitshuffle: block size in elements (0: its default)
  unsigned compression = 0;      // bitshuffle: 0 none, 2 LZ4, 3 Zstd
};

}  // namespace gpufeed::detail::hdf5
