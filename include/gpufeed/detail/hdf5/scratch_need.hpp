// gpufeed — the decode scratch an HDF5 chunk's filters need (unit_cache::scratch_need, held by
// the reader's unit_cache::scratch_lease within the decoded-chunk budget): the chunk's stored
// bytes, and for each filter undone before the last (which writes the output) an intermediate
// buffer, alternating between two.
#pragma once

#include <algorithm>
#include <cstddef>

#include "gpufeed/detail/hdf5/chunk_decoders.hpp"
#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/detail/unit_cache/scratch_lease.hpp"

namespace gpufeed::detail::hdf5 {

// Bytes each scratch buffer needs to undo chunk c's filters (c has at least one active).
inline unit_cache::scratch_need scratch_need_of(const shard_index& s,
                                                const chunk_entry& c) noexcept {
  const std::size_t n = std::min<std::size_t>(s.pipeline.size(), 32);
  auto active = [&](std::size_t k) { return !(c.filter_mask & (1u << k)); };
  std::size_t first = 0;
  while (first < n && !active(first)) ++first;
  std::size_t fletchers = 0, stages = 0;
  for (std::size_t k = first; k < n; ++k) {
    if (!active(k)) continue;
    if (s.pipeline[k].kind == codec::kind::fletcher32)
      ++fletchers;
    else
      ++stages;
  }
  // The last filter undone writes the output when it is not a checksum; every other stage
  // writes a or b in turn, at most the larger of the stored bytes and a compressor's output.
  const std::size_t between =
      stages - (first < n && s.pipeline[first].kind != codec::kind::fletcher32 ? 1 : 0);
  const std::size_t widest =
      std::max<std::size_t>(static_cast<std::size_t>(c.size), s.grid.chunk_bytes + 4 * fletchers);
  unit_cache::scratch_need need;
  need.stored = static_cast<std::size_t>(c.size);
  need.a = between >= 1 ? widest : 0;
  need.b = between >= 2 ? widest : 0;
  return need;
}

}  // namespace gpufeed::detail::hdf5
