// gpufeed — the automatic byte budget of a decoded-unit cache (shared_chunk_cache.hpp), from the
// geometry of the source's decode units and how its loaders read (read_plan).
//
// The cache must hold every unit that is open at once — decoded, with records still to read
// this epoch:
//   block_shuffled  the window's W units, plus the units the planner's look-ahead reaches past
//                   the window's edge (prefetch x batch_size records, at R records per unit:
//                   ceil(L / R) + 1), plus one per worker starting a unit; W more when the
//                   loader's workers decode the next window ahead (read_plan::decode_ahead);
//   sequential      the look-ahead alone (W = 0);
//   shuffled        the same sizing; random order reuses little whatever the budget.
// With that budget, shared_chunk_cache's eviction rule (stripes.hpp) decodes each chunk at most
// once per epoch per rank. It is never below 64 MiB (what one reader cached before the cache was
// shared) nor below one record's chunks per worker, and never above the decoded size of all the
// chunks (more could not be used), plus each worker's decode scratch: the budget counts it too
// (decode_scratch.hpp), three chunks a worker (a chunk's stored bytes and up to two filter
// stages, or one stage of an incompressible chunk stored larger than it decodes).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "gpufeed/source.hpp"

namespace gpufeed::detail::unit_cache {

inline constexpr std::size_t min_cache_budget = std::size_t{64} << 20;

// What the budget needs to know about a source's decode units (for HDF5: unit_geometry_of,
// detail/hdf5/unit_geometry.hpp).
struct unit_geometry {
  std::uint64_t band_bytes = 0;     // decoded bytes of the largest unit
  std::uint64_t band_records = 0;   // records per unit (the smallest, fixed; the mean, blob)
  std::uint64_t record_bytes = 0;   // decoded bytes of the chunks one record touches (largest)
  std::uint64_t all_bytes = 0;      // decoded bytes of every chunk
  std::uint64_t chunk_bytes = 0;    // decoded bytes of one chunk (sizes decode scratch)
};

inline std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) noexcept {
  return b && a > std::numeric_limits<std::uint64_t>::max() / b
             ? std::numeric_limits<std::uint64_t>::max()
             : a * b;
}

// The budget for reads planned as p (p = {} before any loader says: one reader, no window).
inline std::size_t automatic_cache_budget(const unit_geometry& u, const read_plan& p) noexcept {
  if (u.band_bytes == 0) return 0;  // no chunked shard: nothing is ever cached
  const std::uint64_t r = std::max<std::uint64_t>(1, u.band_records);
  std::uint64_t window = p.window_units;
  if (!window && p.window_records) window = (p.window_records + r - 1) / r + 1;
  const std::uint64_t ahead = (p.lookahead_records + r - 1) / r + 1;
  // decoding ahead holds the next window beside the one being read
  const std::uint64_t units = (p.decode_ahead ? 2 * window : window) + ahead + p.workers;
  std::uint64_t want = saturating_mul(units, u.band_bytes);
  want = std::max(want, saturating_mul(p.workers + 1, u.record_bytes));
  want = std::max<std::uint64_t>(want, min_cache_budget);
  want = std::min(want, std::max<std::uint64_t>(u.all_bytes, u.record_bytes));
  const std::uint64_t scratch = saturating_mul(p.workers, saturating_mul(3, u.chunk_bytes));
  want = want > std::numeric_limits<std::uint64_t>::max() - scratch
             ? std::numeric_limits<std::uint64_t>::max()
             : want + scratch;
  return static_cast<std::size_t>(
      std::min<std::uint64_t>(want, std::numeric_limits<std::size_t>::max()));
}

}  // namespace gpufeed::detail::unit_cache
