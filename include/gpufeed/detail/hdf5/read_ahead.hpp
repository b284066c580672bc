// gpufeed — read-ahead advice for an indexed HDF5 shard: its reader's will_need (for a posix_file
// posix_fadvise(POSIX_FADV_WILLNEED)) over the file extents a range of records will read, so the kernel starts fetching them (whole
// extents, in the background) before the workers' preads ask for them. Advice only: failures
// are ignored, nothing is read here, and fallback shards (read through H5Dread) are not advised.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/detail/hdf5/source_state.hpp"

namespace gpufeed::detail::hdf5 {

#ifdef GPUFEED_TESTING
// Test-only observation point (test targets define GPUFEED_TESTING): when set, called with each
// extent advised (file, offset, bytes).
using advise_hook = void (*)(const std::string& path, std::uint64_t offset,
                             std::uint64_t bytes) noexcept;
inline std::atomic<advise_hook> advise_observer{nullptr};
#endif

inline void advise_extent(const shard_index& s, std::uint64_t at, std::uint64_t bytes) noexcept {
  if (bytes == 0) return;
#ifdef GPUFEED_TESTING
  if (const auto hook = advise_observer.load(std::memory_order_relaxed)) hook(s.path, at, bytes);
#endif
  s.file.will_need(at, bytes);
}

// Advises the extents of local records [lo, hi) of s: one extent for contiguous data; for
// chunked data the chunks of every band the records touch, adjacent chunks merged into one
// extent (h5py and gpufeed pack write a band's chunks back to back).
inline void advise_records(const shard_index& s, std::uint64_t lo, std::uint64_t hi) noexcept {
  hi = std::min(hi, s.records);
  if (lo >= hi) return;
  const std::uint64_t first = s.blob ? s.offsets[lo] : lo;   // along dimension 0
  const std::uint64_t end = s.blob ? s.offsets[hi] : hi;
  if (end <= first) return;
  switch (s.kind) {
    case read_kind::fallback:
      return;
    case read_kind::contiguous: {
      const std::uint64_t unit = s.blob ? 1 : s.row_bytes;
      advise_extent(s, s.base + first * unit, (end - first) * unit);
      return;
    }
    case read_kind::chunked: {
      const chunk_grid& g = s.grid;
      if (g.grid[0] == 0) return;
      const std::uint64_t slab = g.chunk_count / g.grid[0];
      const std::uint64_t k0 = first / g.chunk[0] * slab;
      const std::uint64_t k1 = std::min(((end - 1) / g.chunk[0] + 1) * slab, g.chunk_count);
      std::uint64_t at = 0, stop = 0;
      for (std::uint64_t k = k0; k < k1; ++k) {
        const chunk_entry& c = s.chunks[static_cast<std::size_t>(k)];
        if (c.size == 0) continue;
        if (stop != 0 && c.address == stop) {
          stop += c.size;
          continue;
        }
        advise_extent(s, at, stop - at);
        at = c.address;
        stop = c.address + c.size;
      }
      advise_extent(s, at, stop - at);
      return;
    }
  }
}

// Advises the extents records [first, first + count) of a source read (clipped to the source),
// shard by shard. Shards not opened yet, or whose descriptors are closed (shard_lru), are not
// advised: opening is I/O, and their first read opens them.
inline void advise_source_records(const source_state& st, std::uint64_t first,
                                  std::uint64_t count) noexcept {
  st.space.for_each_shard_part(first, count, [&](std::size_t k, std::uint64_t lo,
                                                  std::uint64_t hi) noexcept {
    if (!st.is_open(k) || !st.space.lru().pin_if_open(k)) return;
    advise_records(st.shard(k), lo, hi);
    st.space.lru().unpin(k);
  });
}

}  // namespace gpufeed::detail::hdf5
