// gpufeed::detail::codec — which filter or codec: the one enum HDF5 reading (filter_step) and
// pack (chunk_codec) share, and the identity each codec file declares for it (its HDF5 filter id
// and name), gathered in one table by registry.hpp. No library header: pack without the HDF5
// writer names kinds too.
#pragma once

namespace gpufeed::detail::codec {

// The filters gpufeed decodes itself (detail/hdf5/chunk_decoders.hpp): HDF5's own deflate,
// shuffle and fletcher32, and the plugin filters h5py + hdf5plugin write (Blosc, LZ4,
// Bitshuffle, Zstd). `none`: no filter (pack's "no compression"; HDF5's H5Z_FILTER_NONE).
// `other`: a filter gpufeed does not decode (such a shard is read through H5Dread; its pipeline
// step keeps the pipeline's positions, which chunk filter masks count).
enum class kind : unsigned char {
  none, deflate, shuffle, fletcher32, lz4, bitshuffle, blosc, zstd, other
};

// A filter's identity: its kind, its registered HDF5 filter id (the HDF Group's filter registry;
// an int, as H5Z_filter_t) and the name gpufeed gives it in descriptions and messages.
struct identity {
  codec::kind kind = codec::kind::other;
  int filter_id = -1;
  const char* name = "";
};

// True for the kinds gpufeed decodes (not `none`, not `other`).
constexpr bool decoded(kind k) noexcept { return k != kind::none && k != kind::other; }

}  // namespace gpufeed::detail::codec
