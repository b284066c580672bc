// gpufeed — which shard writers this translation unit has (see gpufeed/pack/pack.hpp,
// "Formats"), and the writers themselves.
#pragma once

#if !defined(GPUFEED_PACK_HDF5) && !defined(GPUFEED_PACK_LMDB)
#error "gpufeed/pack/pack.hpp needs a shard writer: link gpufeed::pack, gpufeed::pack_hdf5 or gpufeed::pack_lmdb (or define GPUFEED_PACK_HDF5 / GPUFEED_PACK_LMDB)"
#endif

#if defined(GPUFEED_PACK_HDF5)
#include "gpufeed/pack/detail/hdf5_writer.hpp"
#include "gpufeed/hdf5_source.hpp"
#endif
#if defined(GPUFEED_PACK_LMDB)
#include "gpufeed/pack/detail/lmdb_writer.hpp"
#include "gpufeed/lmdb_source.hpp"
#endif

// The inline namespace pack() and verify_pack() are defined in: one name per set of formats.
#if defined(GPUFEED_PACK_HDF5) && defined(GPUFEED_PACK_LMDB)
#define GPUFEED_PACK_FORMATS formats_hdf5_lmdb
#elif defined(GPUFEED_PACK_HDF5)
#define GPUFEED_PACK_FORMATS formats_hdf5
#else
#define GPUFEED_PACK_FORMATS formats_lmdb
#endif

namespace gpufeed::detail::pack {

inline constexpr bool has_hdf5_writer =
#if defined(GPUFEED_PACK_HDF5)
    true;
#else
    false;
#endif
inline constexpr bool has_lmdb_writer =
#if defined(GPUFEED_PACK_LMDB)
    true;
#else
    false;
#endif

}  // namespace gpufeed::detail::pack
