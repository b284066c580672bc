// gpufeed — the geometry of an hdf5_source's decode units, which sizes its decoded-chunk
// cache's automatic budget (detail/unit_cache/automatic_budget.hpp).
//
// A decode unit is a band: the chunks that cover the same rows (same position along dimension
// 0), however many chunks a row spans; hdf5_source::decode_unit numbers them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/detail/unit_cache/automatic_budget.hpp"

namespace gpufeed::detail::hdf5 {

// From the first shard (the others, opened lazily, are taken to be chunked alike) and the
// number of shards.
inline unit_cache::unit_geometry unit_geometry_of(const shard_index& s, std::size_t shards) {
  unit_cache::unit_geometry u;
  if (s.kind != read_kind::chunked || s.grid.chunk_bytes == 0 || s.grid.grid[0] == 0) return u;
  const std::uint64_t chunk = s.grid.chunk_bytes;
  u.band_bytes = s.grid.chunk_count / s.grid.grid[0] * chunk;
  u.band_records = s.blob ? std::max<std::uint64_t>(1, s.records / s.grid.grid[0]) : s.grid.chunk[0];
  u.record_bytes = s.chunks_per_record * chunk;
  u.all_bytes = unit_cache::saturating_mul(s.grid.chunk_count * chunk, shards);
  u.chunk_bytes = chunk;
  return u;
}

}  // namespace gpufeed::detail::hdf5
