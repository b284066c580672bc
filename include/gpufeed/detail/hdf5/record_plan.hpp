// gpufeed — where one record of a chunked dataset lies, as a list the reader walks: the chunks
// it touches and, per chunk, the runs to copy (geometry.hpp's for_each_chunk and chunk_part,
// worked out ahead).
//
// For the fixed layout the list is the same for every row up to a shift: row r touches the
// chunks of its band (chunk row r / chunk[0], every chunk across the other dimensions), and its
// part of each is row 0's part moved down by (r % chunk[0]) chunk rows. So a shard computes its
// row plan once at open and a read only adds the shift. Working it out per record cost a fifth
// of a worker's time on h5py's 64-chunk rows (in perf: two chunk_part constructions per
// chunk per record). Blob records (byte ranges) get a plan per read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpufeed/detail/hdf5/geometry.hpp"

namespace gpufeed::detail::hdf5 {

struct record_run {
  std::size_t src = 0;  // byte offset in the decoded chunk (before the row shift)
  std::size_t dst = 0;  // byte offset in the record
  std::size_t len = 0;
};

struct record_plan {
  std::vector<std::uint64_t> chunk;  // chunk numbers, relative to the caller's base
  std::vector<std::size_t> first;    // chunk.size() + 1: chunk i's runs are [first[i], first[i+1])
  std::vector<record_run> runs;

  [[nodiscard]] std::size_t chunks() const noexcept { return chunk.size(); }
  [[nodiscard]] bool empty() const noexcept { return chunk.empty(); }
  void clear() noexcept {
    chunk.clear();
    first.clear();
    runs.clear();
  }

  // Fills the plan for `box` (chunk numbers absolute, minus `base`).
  void build(const chunk_grid& g, const record_box& box, std::uint64_t base = 0) {
    clear();
    first.push_back(0);
    for_each_chunk(g, box, [&](std::uint64_t k, const coords& at) {
      chunk.push_back(k - base);
      chunk_part(g, box, at).for_each_run([&](std::size_t src, std::size_t dst, std::size_t len) {
        runs.push_back(record_run{src, dst, len});
      });
      first.push_back(runs.size());
    });
  }
};

// The fixed layout's row plan (row 0's, chunk numbers relative to the band's first chunk), or an
// empty plan when a row's runs would exceed `max_runs` (the reader then plans per record).
struct row_plan {
  record_plan plan;
  std::uint64_t band_rows = 1;   // chunk[0]
  std::uint64_t band_chunks = 1;  // chunks per band: the product of the grid's other dimensions
  std::size_t row_stride = 0;     // bytes between rows inside a chunk

  [[nodiscard]] bool usable() const noexcept { return !plan.empty(); }

  static row_plan of(const chunk_grid& g, const coords& dims, std::size_t max_runs = 1 << 16) {
    row_plan r;
    if (g.rank < 1 || g.chunk[0] == 0) return r;
    std::uint64_t runs = 1;  // an upper bound: runs of one row inside one chunk, times chunks
    r.band_chunks = 1;
    for (int d = 1; d < g.rank; ++d) {
      r.band_chunks *= g.grid[d];
      if (d + 1 < g.rank) runs *= g.chunk[d];
    }
    if (r.band_chunks * runs > max_runs) return r;
    record_box row0;
    row0.count[0] = 1;
    for (int d = 1; d < g.rank; ++d) row0.count[d] = dims[d];
    r.plan.build(g, row0);
    r.band_rows = g.chunk[0];
    r.row_stride = g.chunk_stride[0];
    return r;
  }
};

}  // namespace gpufeed::detail::hdf5
