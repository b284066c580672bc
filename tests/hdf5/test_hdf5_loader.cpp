// The loader over hdf5_source: decode units, and worker tasks that keep a compressed chunk's rows
// together in sequential order (so each chunk is decoded once per epoch, not once per task that
// touches it), with every byte still delivered exactly once.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "decode_counter.hpp"
#include "h5_writer.hpp"
#include "hdf5_test_util.hpp"
#include "sequential_check.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::pattern;
using gpufeed::test::rows_of;

namespace {

constexpr std::size_t row = 4096;  // bytes per record: the automatic task size is 64 records

// Three shards: deflate with 100-row chunks (700 rows), uncompressed (300 rows), shuffle+deflate
// with 64-row chunks (500 rows). Shard boundaries fall inside batches and across chunk rows.
struct three_shards {
  gpufeed::test::temp_dir dir{"h5ld"};
  std::vector<std::filesystem::path> paths;
  std::vector<std::vector<std::byte>> expected;

  three_shards() {
    const std::uint64_t rows[] = {700, 300, 500};
    for (int k = 0; k < 3; ++k) {
      const auto v = pattern<std::uint8_t>(rows[k] * row, 90 + k);
      const auto path = dir / ("s" + std::to_string(k) + ".h5");
      h5_file f(path);
      dataset_spec s;
      s.dims = {rows[k], row};
      if (k == 0) s.chunk = {100, row};
      if (k == 2) s.chunk = {64, row / 2};  // two chunks across a row
      if (k == 2) s.shuffle = true;
      if (k != 1) s.deflate = 1;
      f.add(s, v);
      for (auto& r : rows_of(v, row)) expected.push_back(std::move(r));
      paths.push_back(path);
    }
  }
};

loader_config sequential(std::size_t batch) {
  loader_config c;
  c.batch_size = batch;
  c.order = sample_order::sequential;
  c.part = partition{};
  c.workers = 2;
  c.prefetch = 4;
  c.epochs = 1;
  return c;
}

// Drains the loader; checks every record's bytes and appends its index to `seen`.
void drain(loader<hdf5_source>& l, const three_shards& d, std::vector<std::uint64_t>& seen) {
  while (auto b = l.next()) {
    for (std::size_t k = 0; k < b->size(); ++k) {
      const auto i = b->indices()[k];
      const auto& want = d.expected[static_cast<std::size_t>(i)];
      const auto got = b->record(k);
      REQUIRE(got.size() == want.size());
      CHECK(std::equal(want.begin(), want.end(), got.begin()));
      seen.push_back(i);
    }
  }
}

void check_exactly_once(std::vector<std::uint64_t> seen, std::uint64_t n) {
  std::sort(seen.begin(), seen.end());
  std::vector<std::uint64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  CHECK(seen == all);
}

// Reads one epoch, checking every byte and that each record arrives once. Returns worker tasks.
std::uint64_t epoch_tasks(const hdf5_source& src, const three_shards& d, loader_config c) {
  loader<hdf5_source> l(src, c);
  std::vector<std::uint64_t> seen;
  drain(l, d, seen);
  check_exactly_once(std::move(seen), src.size());
  std::uint64_t tasks = 0;
  for (const auto& w : l.stats().workers) tasks += w.chunks;
  return tasks;
}

using gpufeed::test::decode_counter;

// three_shards' compressed chunks: shard 0 has 7 (100 rows each), shard 2 has 8 x 2 (64 rows,
// two chunks across a row).
constexpr std::size_t compressed_chunks = 7 + 8 * 2;

}  // namespace

TEST_CASE("decode_unit: one unit per compressed chunk of rows, distinct across shards") {
  three_shards d;
  hdf5_source src(d.paths);
  REQUIRE(src.size() == 1500);
  // Shard 0: rows 0..99 share a chunk, 100 starts the next.
  CHECK(src.decode_unit(0) == src.decode_unit(99));
  CHECK(src.decode_unit(99) != src.decode_unit(100));
  CHECK(src.decode_unit(100) == src.decode_unit(199));
  // Shard 1 is uncompressed: every record is its own unit.
  CHECK(src.decode_unit(700) != src.decode_unit(701));
  // Shard 2 (records 1000..1499): 64-row chunks, counted from the shard's own first row.
  CHECK(src.decode_unit(1000) == src.decode_unit(1063));
  CHECK(src.decode_unit(1063) != src.decode_unit(1064));
  // Units of different shards never coincide.
  CHECK(src.decode_unit(699) != src.decode_unit(1000));
  CHECK(src.decode_unit(0) != src.decode_unit(1000));
}

TEST_CASE("decode_unit of the blob layout: records starting in the same chunk of bytes") {
  gpufeed::test::temp_dir dir("h5lb");
  const auto path = dir / "b.h5";
  std::vector<std::uint64_t> offsets;
  for (std::uint64_t k = 0; k <= 40; ++k) offsets.push_back(k * 30);  // 40 records of 30 bytes
  {
    h5_file f(path);
    dataset_spec data;
    data.dims = {offsets.back()};
    data.chunk = {100};  // records 0..3 start in chunk 0 (bytes 0..99), record 4 at byte 120
    data.deflate = 1;
    f.add(data, pattern<std::uint8_t>(offsets.back(), 3));
    f.add_offsets(offsets);
  }
  hdf5_source src(path);
  CHECK(src.decode_unit(0) == src.decode_unit(3));
  CHECK(src.decode_unit(3) != src.decode_unit(4));
}

TEST_CASE("sequential loader: tasks end at chunk boundaries, every byte delivered once") {
  three_shards d;
  hdf5_source src(d.paths);
  // Automatic task size (64 records here) on chunk boundaries: fewer tasks than 64-record cuts,
  // since a task that reaches 64 records runs on to the end of its chunk.
  const std::uint64_t by_unit = epoch_tasks(src, d, sequential(256));
  // The same size set by hand cuts every 64 records, chunks or not.
  loader_config fixed = sequential(256);
  fixed.chunk_records = 64;
  const std::uint64_t by_count = epoch_tasks(src, d, fixed);
  // 6 batches: 5 of 256 and one of 220; each cut every 64 positions.
  CHECK(by_count == 5 * 4 + 4);
  // On chunk boundaries (a task runs past 64 records to its chunk's end, never past the batch's),
  // batch by batch: [0,100) [100,200) [200,256) | [256,400) [400,500) [500,512) | [512,600)
  // [600,700) [700,764) [764,768) | 4 x 64 to 1024 | [1024,1128) [1128,1192) [1192,1256)
  // [1256,1280) | [1280,1384) [1384,1448) [1448,1500): 3 + 3 + 4 + 4 + 4 + 3.
  CHECK(by_unit == 21);
  MESSAGE("worker tasks per epoch: " << by_unit << " on chunk boundaries, " << by_count
                                     << " every 64 records");

  // Shuffled order: neighbours rarely share a chunk, so tasks are cut by count as before.
  loader_config shuffled = sequential(256);
  shuffled.order = sample_order::shuffled;
  CHECK(epoch_tasks(src, d, shuffled) == by_count);
}

TEST_CASE("sequential loader, automatic tasks: each compressed chunk is decoded once per epoch") {
  three_shards d;
  for (std::size_t workers : {2, 3, 4}) {
    // One batch holds the epoch. A fresh source each run: its shared cache starts empty.
    for (int run = 0; run < 3; ++run) {
      hdf5_source src(d.paths);
      loader_config c = sequential(2048);
      c.workers = workers;
      const decode_counter counter;
      {
        loader<hdf5_source> l(src, c);
        std::vector<std::uint64_t> seen;
        drain(l, d, seen);
        check_exactly_once(std::move(seen), src.size());
      }
      const auto counts = decode_counter::take();
      CHECK(counts.size() == compressed_chunks);
      std::size_t not_once = 0;
      for (const auto& [chunk, n] : counts) not_once += n != 1;
      CHECK_MESSAGE(not_once == 0, workers << " workers: " << not_once
                                           << " chunks decoded more than once");
    }
  }
  // Batches of 256: chunks straddling two batches (rows 200..299, 500..599; shard 2's chunks at
  // 1000..1063 and 1256..1319, two each) are read by two tasks, often on two workers. With
  // per-worker caches they were decoded once per worker that read them (up to 2); the shared
  // cache decodes each exactly once.
  for (int run = 0; run < 3; ++run) {
    hdf5_source src(d.paths);
    const decode_counter counter;
    {
      loader_config c = sequential(256);
      c.workers = 4;
      loader<hdf5_source> l(src, c);
      std::vector<std::uint64_t> seen;
      drain(l, d, seen);
      const auto ds = l.stats().decode;
      REQUIRE(ds.has_value());
      CHECK(ds->chunks_decoded == compressed_chunks);
      CHECK(ds->cache_peak_bytes <= ds->cache_budget_bytes);
    }
    const auto counts = decode_counter::take();
    CHECK(counts.size() == compressed_chunks);
    for (const auto& [chunk, n] : counts) CHECK(n == 1);
  }
}

TEST_CASE("sequential order through the loader: 0..n-1 each epoch, bytes exact, any workers") {
  three_shards d;
  hdf5_source src(d.paths);
  for (const std::size_t workers : {1, 2, 4, 7}) {
    CAPTURE(workers);
    loader_config c = sequential(200);
    c.workers = workers;
    c.epochs = 2;
    loader<hdf5_source> l(src, c);
    test::check_sequential_epochs(l, src.size(), 2, [&](std::uint64_t i, auto bytes) {
      const auto& want = d.expected[static_cast<std::size_t>(i)];
      return bytes.size() == want.size() && std::equal(want.begin(), want.end(), bytes.begin());
    });
  }
}

TEST_CASE("sequential loader over ranks: a rank's block starts mid-chunk, bytes still exact") {
  three_shards d;
  hdf5_source src(d.paths);
  std::vector<std::uint64_t> seen;
  // 375 records per rank: ranks 1 and 3 start inside a chunk (rows 375 and 1125).
  for (std::uint32_t r = 0; r < 4; ++r) {
    loader_config c = sequential(96);
    c.part = partition{r, 4};
    loader<hdf5_source> l(src, c);
    drain(l, d, seen);
  }
  check_exactly_once(std::move(seen), src.size());
}

TEST_CASE("a record transform over HDF5 shards: its input is the record, its errors name the shard") {
  static_assert(gpufeed::detail::loading::sharded_source<hdf5_source>);
  const three_shards d;
  const hdf5_source src(d.paths);
  loader_config c = sequential(50);
  c.order = sample_order::shuffled;
  c.workers = 3;
  // Fixed 16-byte outputs: the record's first 8 and last 8 bytes.
  c.per_record = record_transform::fixed(
      16, [&d](const record_input& in, std::span<std::byte> out, record_rng&) {
        if (in.index == 850) throw corrupt_error("not an image");
        REQUIRE(in.bytes.size() == row);
        CHECK(std::equal(in.bytes.begin(), in.bytes.end(),
                         d.expected[static_cast<std::size_t>(in.index)].begin()));
        std::copy_n(in.bytes.begin(), 8, out.begin());
        std::copy_n(in.bytes.end() - 8, 8, out.begin() + 8);
      });
  loader<hdf5_source> l(src, c);
  std::vector<int> seen(src.size(), 0);
  int errors = 0;
  for (;;) {
    try {
      auto b = l.next();
      if (!b) break;
      for (std::size_t k = 0; k < b->size(); ++k) {
        const auto i = static_cast<std::size_t>(b->indices()[k]);
        const auto r = b->record(k);
        REQUIRE(r.size() == 16);
        CHECK(std::equal(r.begin(), r.begin() + 8, d.expected[i].begin()));
        CHECK(std::equal(r.begin() + 8, r.end(), d.expected[i].end() - 8));
        ++seen[i];
      }
    } catch (const corrupt_error& e) {
      ++errors;
      CHECK(e.file() == d.paths[1].string());  // record 850 lies in the second shard
      CHECK(e.record() == 850u);
    }
  }
  CHECK(errors == 1);
  CHECK(std::count(seen.begin(), seen.end(), 1) == 1500 - 50);  // the broken batch is lost
  CHECK(std::count(seen.begin(), seen.end(), 0) == 50);
}
