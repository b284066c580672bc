// Decode once: the decoded-chunk cache all readers of an hdf5_source share. On gzip, LZ4 and
// Zstd shards written by h5py (make_codec_fixtures.py, scale 6), with rows spanning 16 chunks
// and chunks of 50 rows: each chunk decoded exactly once per epoch by several workers, in
// sequential order through the loader and in a window order (records of W decode units shuffled
// together, as sample_order::block_shuffled does) with a budget that holds the window but not
// the data; held bytes never above the budget; damaged chunks still give corrupt_error naming
// the shard and each reader's own record.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <latch>
#include <numeric>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "chunk_rewrite.hpp"
#include "codec_fixtures.hpp"
#include "decode_counter.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "memory_source.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;
using gpufeed::test::decode_counter;

namespace {

const fs::path& fixtures() {
  static gpufeed::test::temp_dir dir("h5once");
  static const bool made = gpufeed::test::make_codec_fixtures(
      dir.path(), " 6 > /dev/null",
      "test_hdf5_decode_once: skipped (install the fixture writers: scripts/setup.sh)");
  (void)made;
  return dir.path();
}

// gzip (+ shuffle + fletcher32), LZ4 and Zstd; "span": 240 rows of 2048 float32 in chunks of
// 8 x 128 (a row spans 16 chunks; a unit is a band of 16 chunks, 8 rows, 64 KiB); "rows": 1860
// rows of 64 in chunks of 50 rows (38 units of 12.8 KB, the last one partial).
const std::vector<std::string> names = {"gzip_span", "gzip_rows", "lz4_span",
                                        "lz4_rows",  "zstd_span", "zstd_rows"};

struct shape {
  std::size_t row_bytes;
  std::uint64_t band_rows, band_bytes, chunks, chunk_bytes;
};
shape shape_of(const std::string& name) {
  if (name.ends_with("_span")) return {2048 * 4, 8, 16 * 8 * 128 * 4, 30 * 16, 8 * 128 * 4};
  return {64 * 4, 50, 50 * 64 * 4, 38, 50 * 64 * 4};
}

std::vector<std::byte> expected(const std::string& name) {
  return gpufeed::test::fixture_bytes(fixtures(), name);
}

// Bands of `band_rows` records in a seeded random order, cut into windows of `window` bands,
// the records of each window shuffled together.
std::vector<std::uint64_t> window_order(std::uint64_t records, std::uint64_t band_rows,
                                        std::uint64_t window, std::uint64_t seed) {
  const std::uint64_t bands = (records + band_rows - 1) / band_rows;
  std::vector<std::uint64_t> band(bands);
  std::iota(band.begin(), band.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(band.begin(), band.end(), rng);
  std::vector<std::uint64_t> order;
  for (std::uint64_t w = 0; w < bands; w += window) {
    const std::size_t from = order.size();
    for (std::uint64_t b = w; b < std::min(bands, w + window); ++b)
      for (std::uint64_t r = band[b] * band_rows; r < std::min(records, (band[b] + 1) * band_rows);
           ++r)
        order.push_back(r);
    std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(from), order.end(), rng);
  }
  return order;
}

// Reads `order` in tasks of `task` records, `threads` threads each with its own reader (as the
// loader's workers), in rounds of one task per thread: like the loader's prefetch credits, the
// round bounds how far reads run ahead of the slowest reader. Returns the records whose bytes
// differ.
std::size_t read_in_tasks(const hdf5_source& src, const std::vector<std::uint64_t>& order,
                          const std::vector<std::byte>& want, std::size_t row, int threads,
                          std::size_t task) {
  std::atomic<std::size_t> bad{0};
  std::barrier round(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto r = src.make_reader();
      std::vector<std::byte> buf(row);
      const std::size_t step = task * static_cast<std::size_t>(threads);
      for (std::size_t base = 0; base < order.size(); base += step) {
        const std::size_t at = base + task * static_cast<std::size_t>(t);
        for (std::size_t k = at; k < std::min(order.size(), at + task); ++k) {
          r.read(order[k], buf);
          if (!std::equal(buf.begin(), buf.end(), want.begin() + order[k] * row)) ++bad;
        }
        round.arrive_and_wait();
      }
    });
  for (auto& t : pool) t.join();
  return bad;
}

// Every chunk of the shard decoded exactly `n` times (n = 1), or at most once (n = 0: a later
// epoch may find chunks still cached).
void check_counts(const decode_counter::counts& counts, std::uint64_t chunks, bool exactly) {
  if (exactly) CHECK(counts.size() == chunks);
  CHECK(counts.size() <= chunks);
  std::size_t more = 0;
  for (const auto& [chunk, n] : counts) more += n > 1;
  CHECK_MESSAGE(more == 0, more << " chunks decoded more than once");
}

// Two epochs of fixture `name` through a loader in c's order with 3 workers and batches of 7
// records (tasks and batches cut across chunks): every record delivered has the bytes h5py wrote,
// each epoch delivers every record, and each chunk is decoded once in all (the automatic budget,
// at least 64 MiB, holds these shards: the second epoch decodes none). Returns the loader's
// decode statistics and the source's record count.
struct two_epoch_run {
  decode_stats decode;
  std::uint64_t records;
};
two_epoch_run two_epochs(const std::string& name, loader_config c) {
  const shape sh = shape_of(name);
  const auto want = expected(name);
  hdf5_source src(fixtures() / (name + ".h5"));
  const decode_counter counter;
  c.batch_size = 7;
  c.workers = 3;
  c.prefetch = 4;
  c.epochs = 2;
  loader<hdf5_source> l(src, c);
  std::size_t bad = 0, records = 0;
  while (auto b = l.next()) {
    for (std::size_t k = 0; k < b->size(); ++k) {
      const auto got = b->record(k);
      bad += !std::equal(got.begin(), got.end(), want.begin() + b->indices()[k] * sh.row_bytes);
    }
    records += b->size();
  }
  CHECK(bad == 0);
  CHECK(records == 2 * src.size());
  check_counts(decode_counter::take(), sh.chunks, true);
  const auto ds = l.stats().decode;
  REQUIRE(ds.has_value());
  return {*ds, src.size()};
}

}  // namespace

TEST_CASE("sequential loader, 3 workers: each chunk decoded once per epoch, stats agree") {
  for (const auto& name : names) {
    CAPTURE(name);
    const shape sh = shape_of(name);
    loader_config c;
    c.order = sample_order::sequential;
    c.chunk_records = 3;
    const auto [ds, records] = two_epochs(name, c);
    CHECK(ds.chunks_decoded == sh.chunks);
    CHECK(ds.records == 2 * records);
    CHECK(ds.delivered_bytes == 2 * records * sh.row_bytes);
    CHECK(ds.decoded_bytes == sh.chunks * sh.chunk_bytes);
    CHECK(ds.cache_peak_bytes <= ds.cache_budget_bytes);
    CHECK(ds.amplification() < 1.0);  // each byte decoded once, delivered twice
  }
}

TEST_CASE("block_shuffled through the loader, 3 workers: each chunk decoded once per epoch") {
  for (const bool ahead : {true, false}) {  // loader_config::decode_ahead (on by default)
    for (const auto& name : names) {
      CAPTURE(name);
      CAPTURE(ahead);
      const shape sh = shape_of(name);
      loader_config c;
      c.order = sample_order::block_shuffled;
      if (!ahead) c.decode_ahead = false;
      const auto [ds, records] = two_epochs(name, c);
      CHECK(ds.chunks_decoded == sh.chunks);
      if (!ahead) CHECK(ds.decoded_ahead == 0);
      CHECK(ds.cache_peak_bytes <= ds.cache_budget_bytes);
    }
  }
}

TEST_CASE("block_shuffled, 4 windows an epoch: workers decode the next window ahead, once") {
  // 2048 rows of 1024 float32 (4 KiB) in chunks of 16 x 256, shuffle + deflate: a row spans 4
  // chunks, a band (decode unit) is 16 rows, 64 KiB; the order's units are 1 MiB storage blocks
  // (16 bands), so a window of 2 of them is 32 bands and an epoch has 4 windows.
  gpufeed::test::temp_dir dir("h5ahead");
  const fs::path path = dir.path() / "ahead.h5";
  constexpr std::size_t rows = 2048, cols = 1024;
  std::vector<float> values(rows * cols);
  for (std::size_t k = 0; k < values.size(); ++k)
    values[k] = static_cast<float>(k / cols) + static_cast<float>(k % 97) / 64.0f;
  {
    gpufeed::test::h5_file f(path);
    gpufeed::test::dataset_spec d;
    d.file_type = d.mem_type = H5T_NATIVE_FLOAT;
    d.dims = {rows, cols};
    d.chunk = {16, 256};
    d.shuffle = true;
    d.deflate = 1;
    f.add(d, values);
  }
  constexpr std::uint64_t band = 16 * cols * 4, chunks = rows / 16 * 4, window_bands = 2 * 16;
  // Room for the window being read, the next one decoded ahead, the look-ahead (4 batches of
  // 32 rows: 9 bands), one band per worker and each worker's decode scratch (three chunks):
  // automatic_budget.hpp's sizing with decode-ahead.
  hdf5_options o;
  o.decode_cache_bytes = (2 * window_bands + 9 + 3) * band + 3 * 3 * (16 * 256 * 4);
  REQUIRE(*o.decode_cache_bytes < rows * cols * 4);  // eviction is exercised
  hdf5_source src(path, o);
  const decode_counter counter;
  loader_config c;
  c.order = sample_order::block_shuffled;
  c.shuffle_window = 2;
  c.decode_ahead = true;
  c.batch_size = 32;
  c.workers = 3;
  c.prefetch = 4;
  c.epochs = 1;
  loader<hdf5_source> l(src, c);
  REQUIRE(l.stats().shuffle_window == 2);
  std::size_t bad = 0, records = 0;
  const auto* want = reinterpret_cast<const std::byte*>(values.data());
  while (auto b = l.next()) {
    for (std::size_t k = 0; k < b->size(); ++k) {
      const auto got = b->record(k);
      bad += !std::equal(got.begin(), got.end(), want + b->indices()[k] * cols * 4);
    }
    records += b->size();
  }
  CHECK(bad == 0);
  CHECK(records == rows);
  check_counts(decode_counter::take(), chunks, true);
  const auto ds = l.stats().decode;
  REQUIRE(ds.has_value());
  CHECK(ds->chunks_decoded == chunks);
  CHECK(ds->decoded_ahead > 0);
  CHECK(ds->decoded_ahead <= chunks - window_bands * 4);  // never the first window
  CHECK(ds->uncached_decodes == 0);
  CHECK(ds->cache_peak_bytes <= ds->cache_budget_bytes);
}

namespace {
// Records the plan the loader passes (read_planning_source).
struct planned_source : test::memory_source {
  using test::memory_source::memory_source;
  mutable read_plan plan;
  mutable int calls = 0;
  void plan_reads(const read_plan& p) const {
    plan = p;
    ++calls;
  }
};
}  // namespace

TEST_CASE("the loader tells the source its window and look-ahead (plan_reads)") {
  static_assert(read_planning_source<planned_source>);
  static_assert(!read_planning_source<test::memory_source>);
  planned_source src(100000, 1024);  // storage blocks of 1 MiB: units of 1024 records
  loader_config c;
  c.order = sample_order::block_shuffled;
  c.shuffle_window = 4;
  c.batch_size = 64;
  c.workers = 3;
  c.prefetch = 5;
  c.part = partition{};
  {
    loader<planned_source> l(src, c);
    CHECK(src.calls == 1);
    CHECK(src.plan.window_records == 4 * 1024);
    CHECK(src.plan.lookahead_records == 5 * 64);
    CHECK(src.plan.workers == 3);
  }
  c.order = sample_order::sequential;
  loader<planned_source> seq(src, c);
  CHECK(src.calls == 2);
  CHECK(src.plan.window_records == 0);
  CHECK(src.plan.window_units == 0);
}

TEST_CASE("window order, 4 readers, budget of the window: each chunk once per epoch") {
  constexpr std::uint64_t window = 4;
  constexpr int threads = 4;
  for (const auto& name : names) {
    CAPTURE(name);
    const shape sh = shape_of(name);
    const auto want = expected(name);
    // Open units at once: the window's 4, up to 4 of the next window reached by the round in
    // flight, one per reader decoding, and each reader's decode scratch (three chunks):
    // automatic_budget.hpp's sizing for this harness.
    hdf5_options o;
    o.decode_cache_bytes = (2 * window + threads) * sh.band_bytes + threads * 3 * sh.chunk_bytes;
    hdf5_source src(fixtures() / (name + ".h5"), o);
    REQUIRE(*o.decode_cache_bytes < sh.chunks * sh.chunk_bytes);  // eviction is exercised
    const decode_counter counter;
    for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
      CAPTURE(epoch);
      const auto order = window_order(src.size(), sh.band_rows, window, 11 + epoch);
      CHECK(read_in_tasks(src, order, want, sh.row_bytes, threads, 5) == 0);
      check_counts(decode_counter::take(), sh.chunks, epoch == 0);
    }
    const decode_stats ds = src.decode_stats();
    CHECK(ds.cache_budget_bytes == *o.decode_cache_bytes);
    CHECK(ds.cache_peak_bytes <= ds.cache_budget_bytes);
    CHECK(ds.uncached_decodes == 0);
    CHECK(ds.records == 3 * src.size());
  }
}

namespace {
// The first decode blocks until `others` other chunks have been decoded (or 10 s pass).
struct blocking_first_decode {
  static inline std::mutex mutex;
  static inline std::condition_variable cv;
  static inline std::uint64_t blocked_address = UINT64_MAX;
  static inline std::set<std::uint64_t> decoded;  // chunk addresses, the blocked one excluded
  static inline std::size_t others = 0;
  static inline bool released_by_others = false;

  static void observe(const detail::hdf5::shard_index&, const detail::hdf5::chunk_entry& c) noexcept {
    std::unique_lock lock(mutex);
    if (blocked_address == UINT64_MAX) {
      blocked_address = c.address;
      released_by_others = cv.wait_for(lock, std::chrono::seconds(10),
                                        [] { return decoded.size() >= others; });
      return;
    }
    if (c.address != blocked_address) decoded.insert(c.address);
    cv.notify_all();
  }
};
}  // namespace

TEST_CASE("two readers on one band decode its chunks side by side, not one behind the other") {
  // gzip_span: a row spans 16 chunks; rows 0 and 1 share them. Whichever reader decodes first
  // stalls in its first chunk until the other has decoded the other 15: a reader that waited
  // for a chunk being decoded while the record's other chunks were still undecoded would leave
  // them undone, and the stall would end only by its timeout.
  const shape sh = shape_of("gzip_span");
  const auto want = expected("gzip_span");
  hdf5_source src(fixtures() / "gzip_span.h5");
  blocking_first_decode::others = 15;
  detail::hdf5::chunk_decode_observer.store(&blocking_first_decode::observe);
  std::vector<std::vector<std::byte>> got(2, std::vector<std::byte>(sh.row_bytes));
  {
    std::vector<std::jthread> readers;
    for (std::uint64_t row = 0; row < 2; ++row)
      readers.emplace_back([&, row] { src.make_reader().read(row, got[row]); });
  }
  detail::hdf5::chunk_decode_observer.store(nullptr);
  CHECK(blocking_first_decode::released_by_others);
  CHECK(blocking_first_decode::decoded.size() == 15);  // each of the band's chunks once
  for (std::uint64_t row = 0; row < 2; ++row)
    CHECK(std::equal(got[row].begin(), got[row].end(), want.begin() + row * sh.row_bytes));
}

TEST_CASE("a reader keeps its band pinned across rows of it, counts their reads, lets go idle") {
  // gzip_span: bands of 8 rows over 16 chunks. Rows 0-7 through one reader: one pin of the band
  // for all 8 (its reads counted when it lets go); while held, the band survives
  // drop_decoded_chunks(); after idle() it does not.
  const shape sh = shape_of("gzip_span");
  const auto want = expected("gzip_span");
  hdf5_source src(fixtures() / "gzip_span.h5");
  const decode_counter counter;
  auto r = src.make_reader();
  std::vector<std::byte> buf(sh.row_bytes);
  for (std::uint64_t row = 0; row < 8; ++row) {
    r.read(row, buf);
    CHECK(std::equal(buf.begin(), buf.end(), want.begin() + row * sh.row_bytes));
  }
  CHECK(decode_counter::take().size() == 16);
  src.drop_decoded_chunks();  // the held band stays
  auto other = src.make_reader();
  other.read(3, buf);
  other.idle();
  CHECK(decode_counter::take().empty());
  r.idle();  // lets go: 7 more reads of each of the 16 chunks counted
  CHECK(src.decode_stats().cache_hits == 16 * 7 + 16);
  src.drop_decoded_chunks();
  other.read(3, buf);
  CHECK(std::equal(buf.begin(), buf.end(), want.begin() + 3 * sh.row_bytes));
  CHECK(decode_counter::take().size() == 16);
}

TEST_CASE("a reader that lags a whole epoch behind keeps its chunks: spent ones go first") {
  // Reader 0 reads 2 of its task's 5 records, then waits while 3 others read the rest of the
  // epoch; then it reads its last 3. Its chunks are the least recently used by then: plain LRU
  // evicts them (and decodes them again); spent-first evicts the finished chunks instead.
  constexpr std::uint64_t window = 4;
  constexpr std::size_t task = 5;
  for (const auto& name : {std::string("gzip_span"), std::string("lz4_rows")}) {
    CAPTURE(name);
    const shape sh = shape_of(name);
    const auto want = expected(name);
    hdf5_options o;
    o.decode_cache_bytes = (2 * window + 3 + task) * sh.band_bytes + 2 * 3 * sh.chunk_bytes;
    hdf5_source src(fixtures() / (name + ".h5"), o);
    REQUIRE(*o.decode_cache_bytes < sh.chunks * sh.chunk_bytes);
    const auto order = window_order(src.size(), sh.band_rows, window, 3);
    const decode_counter counter;
    std::atomic<std::size_t> bad{0};
    auto read = [&](hdf5_source::reader& r, std::size_t k) {
      std::vector<std::byte> buf(sh.row_bytes);
      r.read(order[k], buf);
      if (!std::equal(buf.begin(), buf.end(), want.begin() + order[k] * sh.row_bytes)) ++bad;
    };
    std::latch rest_done(1);
    std::thread lagging([&] {
      auto r = src.make_reader();
      read(r, 0);
      read(r, 1);
      rest_done.wait();
      for (std::size_t k = 2; k < task; ++k) read(r, k);
    });
    {
      auto r = src.make_reader();
      for (std::size_t k = task; k < order.size(); ++k) read(r, k);
    }
    rest_done.count_down();
    lagging.join();
    CHECK(bad == 0);
    check_counts(decode_counter::take(), sh.chunks, true);
    CHECK(src.decode_stats().cache_peak_bytes <= *o.decode_cache_bytes);
  }
}

TEST_CASE("a budget below the window: chunks decoded again, bytes exact, held bytes within it") {
  for (const auto& name : {std::string("gzip_span"), std::string("zstd_rows")}) {
    CAPTURE(name);
    const shape sh = shape_of(name);
    const auto want = expected(name);
    hdf5_options o;
    o.decode_cache_bytes = 2 * sh.chunk_bytes;
    hdf5_source src(fixtures() / (name + ".h5"), o);
    const decode_counter counter;
    const auto order = window_order(src.size(), sh.band_rows, 8, 5);
    CHECK(read_in_tasks(src, order, want, sh.row_bytes, 4, 3) == 0);
    const auto counts = decode_counter::take();
    std::uint64_t decodes = 0;
    for (const auto& [chunk, n] : counts) decodes += n;
    CHECK(decodes > sh.chunks);  // the window does not fit: the rule's premise fails
    const decode_stats ds = src.decode_stats();
    CHECK(ds.chunks_decoded == decodes);
    CHECK(ds.cache_peak_bytes <= *o.decode_cache_bytes);
  }
}

TEST_CASE("automatic budget: the loader's plan sizes it for the window and look-ahead") {
  detail::unit_cache::unit_geometry u;
  u.band_bytes = std::uint64_t{4} << 20;  // 4 MiB units of 512 records
  u.band_records = 512;
  u.record_bytes = std::uint64_t{1} << 20;
  u.all_bytes = std::uint64_t{1} << 40;
  read_plan p;
  // No plan yet: the 64 MiB floor.
  CHECK(detail::unit_cache::automatic_cache_budget(u, p) == std::size_t{64} << 20);
  // W = 16 units, prefetch 8 x 512 records (ceil(4096 / 512) + 1 = 9 units), 14 workers:
  // (16 + 9 + 14) x 4 MiB.
  p.window_units = 16;
  p.lookahead_records = 8 * 512;
  p.workers = 14;
  CHECK(detail::unit_cache::automatic_cache_budget(u, p) == std::size_t{39} * (4 << 20));
  // Never above the decoded size of every chunk.
  u.all_bytes = std::uint64_t{100} << 20;
  CHECK(detail::unit_cache::automatic_cache_budget(u, p) == std::size_t{100} << 20);
  // A window given in records: ceil(8192 / 512) + 1 = 17 units.
  u.all_bytes = std::uint64_t{1} << 40;
  p.window_units = 0;
  p.window_records = 8192;
  CHECK(detail::unit_cache::automatic_cache_budget(u, p) == std::size_t{40} * (4 << 20));

  // Through the source: plan_reads raises it; an explicit budget stays.
  hdf5_source src(fixtures() / "gzip_span.h5");
  const std::size_t before = src.decode_stats().cache_budget_bytes;
  CHECK(before == 30 * 16 * 4096);  // the whole data is below the 64 MiB floor
  hdf5_options o;
  o.decode_cache_bytes = 12345;
  hdf5_source fixed(fixtures() / "gzip_span.h5", o);
  fixed.plan_reads(p);
  CHECK(fixed.decode_stats().cache_budget_bytes == 12345);
}

TEST_CASE("damaged chunk read by several readers at once: each gets corrupt_error for its record") {
  gpufeed::test::temp_dir dir("h5once-bad");
  for (const auto& codec : {"gzip", "lz4", "zstd"}) {
    for (const auto& layout : {"_rows", "_span"}) {
      const std::string name = std::string(codec) + layout;
      CAPTURE(name);
      const fs::path bad = dir / (name + ".h5");
      fs::copy_file(fixtures() / (name + ".h5"), bad);
      const std::uint64_t first = gpufeed::test::rewrite_filtered_chunk(
          bad, [](std::vector<unsigned char>& b) { b.resize(b.size() / 2); });
      const shape sh = shape_of(name);
      hdf5_source src(bad);
      // Every record of the damaged chunk's band, 6 threads at once, twice each.
      std::atomic<std::size_t> right{0}, wrong{0};
      std::vector<std::thread> pool;
      for (int t = 0; t < 6; ++t)
        pool.emplace_back([&, t] {
          auto r = src.make_reader();
          std::vector<std::byte> buf(sh.row_bytes);
          for (std::uint64_t k = 0; k < 2 * sh.band_rows; ++k) {
            const std::uint64_t i = first + (k + static_cast<std::uint64_t>(t)) % sh.band_rows;
            try {
              r.read(i, buf);
              ++wrong;
            } catch (const corrupt_error& e) {
              (e.file() == bad.string() && e.record() == i ? right : wrong)++;
            } catch (...) {
              ++wrong;
            }
          }
        });
      for (auto& t : pool) t.join();
      CHECK(wrong == 0);
      CHECK(right == 6 * 2 * sh.band_rows);
      // Neighbouring good records still read.
      std::vector<std::byte> buf(sh.row_bytes);
      auto r = src.make_reader();
      CHECK_NOTHROW(r.read(first + sh.band_rows, buf));
    }
  }
}

TEST_CASE("through the loader: a damaged chunk's records are corrupt_error naming shard and record") {
  gpufeed::test::temp_dir dir("h5once-loader");
  for (const auto& codec : {"gzip", "lz4", "zstd"}) {
    const std::string name = std::string(codec) + "_rows";
    CAPTURE(name);
    const fs::path bad = dir / (name + ".h5");
    fs::copy_file(fixtures() / (name + ".h5"), bad);
    const std::uint64_t first = gpufeed::test::rewrite_filtered_chunk(
        bad, [](std::vector<unsigned char>& b) { b.resize(b.size() / 2); });
    hdf5_source src(bad);
    loader_config c;
    c.order = sample_order::shuffled;
    c.batch_size = 16;
    c.workers = 3;
    c.epochs = 1;
    c.on_error = error_policy::skip;
    loader<hdf5_source> l(src, c);
    std::uint64_t delivered = 0;
    while (auto b = l.next()) delivered += b->size();
    const auto s = l.stats();
    CHECK(delivered + 50 == src.size());
    REQUIRE(s.skipped_log.size() == 50);
    for (const auto& k : s.skipped_log) {
      CHECK(k.index >= first);
      CHECK(k.index < first + 50);
      CHECK(k.what.find(bad.string()) != std::string::npos);
      CHECK(k.what.find("record " + std::to_string(k.index)) != std::string::npos);
    }
  }
}
