// gpufeed — where an indexed HDF5 shard's decoded chunks sit in the source's shared cache
// (detail/unit_cache/shared_chunk_cache.hpp): each chunk's cache group, and how many records of
// an epoch read a chunk of a band, which tells the cache when a chunk is done with.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gpufeed/detail/hdf5/shard.hpp"

namespace gpufeed::detail::hdf5 {

// Records that read a chunk of band `band` (its chunk index along dimension 0) once per epoch:
// the rows (fixed) or the non-empty records (blob, counted by their offsets) that overlap it
// along dimension 0. Records holding a whole chunk never reach the cache, so they are not
// counted.
inline std::uint64_t chunk_users(const shard_index& s, std::uint64_t band) noexcept {
  const std::uint64_t lo = band * s.grid.chunk[0];
  const std::uint64_t hi = std::min(lo + s.grid.chunk[0], s.grid.dims[0]);
  if (hi <= lo) return 1;
  if (!s.blob) return hi - lo;
  const auto& o = s.offsets;  // records + 1 non-decreasing entries
  // first record ending after lo, last record starting before hi
  const auto first = std::upper_bound(o.begin() + 1, o.end(), lo) - (o.begin() + 1);
  const auto last = std::lower_bound(o.begin(), o.end() - 1, hi) - o.begin();
  std::uint64_t n = 0;
  for (auto r = static_cast<std::size_t>(first); r < static_cast<std::size_t>(last); ++r)
    n += o[r + 1] > o[r];
  return n ? n : 1;
}

// The cache group of chunk k of s: its band's first chunk (detail/unit_cache/stripes.hpp:
// the chunks of one band share a stripe, so a record over a band pins them under one lock).
inline std::uint64_t chunk_group(const shard_index& s, std::uint64_t key_base,
                                 std::uint64_t k) noexcept {
  return key_base + k - k % s.rows.band_chunks;
}

}  // namespace gpufeed::detail::hdf5
