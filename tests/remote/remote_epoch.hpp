// Shared by the tests that read HDF5 shards over HTTP: writing a shard of fixed rows, a record
// read through hdf5_source::read, and one epoch of a host loader over the URL shards checked
// against the same shards read locally (every record once, the local bytes).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <vector>

#include "../hdf5/h5_writer.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"

namespace gpufeed::test {

// How a shard of fixed rows is stored: contiguous (chunk_rows 0), or in chunks of chunk_rows
// rows, shuffled and deflated at `deflate` as asked.
struct rows_layout {
  std::uint64_t chunk_rows = 0;
  bool shuffle = false;
  int deflate = -1;
};

// A shard of `rows` rows of `row` bytes each (gpufeed::test::pattern's bytes from `seed`).
inline void write_rows(const std::filesystem::path& p, std::uint64_t rows, std::size_t row,
                       rows_layout layout, unsigned seed) {
  h5_file f(p);
  dataset_spec s;
  s.dims = {rows, row};
  if (layout.chunk_rows) {
    s.chunk = {layout.chunk_rows, row};
    s.shuffle = layout.shuffle;
    s.deflate = layout.deflate;
  }
  f.add(s, pattern<std::uint8_t>(rows * row, seed));
}

inline std::vector<std::byte> record_of(const hdf5_source& s, std::uint64_t i) {
  std::vector<std::byte> out(s.record_size(i));
  s.read(i, out);
  return out;
}

// One epoch of a host loader (3 workers) in `order` over `src`: each record once, with
// `local`'s bytes. Returns the loader's stats.
inline loader_stats check_epoch(const hdf5_source& src, const hdf5_source& local,
                                sample_order order, std::size_t batch = 32,
                                std::uint64_t seed = 0) {
  loader_config c;
  c.epochs = 1;
  c.batch_size = batch;
  c.workers = 3;
  c.order = order;
  c.seed = seed;
  loader<hdf5_source> l(src, c);
  std::vector<std::uint64_t> seen;
  std::size_t wrong = 0;
  while (auto b = l.next()) {
    for (std::size_t k = 0; k < b->size(); ++k) {
      const auto i = b->indices()[k];
      const auto want = record_of(local, i);
      const auto got = b->record(k);
      if (got.size() != want.size() || !std::equal(want.begin(), want.end(), got.begin()))
        ++wrong;
      seen.push_back(i);
    }
  }
  CHECK(wrong == 0);
  std::sort(seen.begin(), seen.end());
  std::vector<std::uint64_t> all(local.size());
  std::iota(all.begin(), all.end(), 0);
  CHECK(seen == all);
  return l.stats();
}

}  // namespace gpufeed::test
