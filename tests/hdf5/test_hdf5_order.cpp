// The epoch orders on HDF5 shards through the real loader: decode units are the band of chunks
// covering a record's rows (however many chunks a row spans), block_shuffled's units follow
// them, and an epoch resumed at other world sizes and worker counts delivers every record's
// bytes exactly once.
#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "elastic_check.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "h5_writer.hpp"
#include "hdf5_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::leg;

namespace {

constexpr std::size_t row = 4096;  // bytes per record: storage blocks of 256 records

// s0: 1000 rows, shuffle + deflate, chunks of 300 rows x 128 bytes (a row spans 32 chunks, a
// band of 300 rows is a decode unit larger than a block); s1: 700 rows, contiguous (records
// decode alone: blocks); s2: 500 rows, deflate, chunks of 20 whole rows (bands smaller than a
// block: several per unit).
struct shards {
  gpufeed::test::temp_dir dir{"h5ord"};
  std::vector<std::filesystem::path> paths;
  std::vector<std::vector<std::byte>> expected;

  shards() {
    const std::uint64_t rows[] = {1000, 700, 500};
    for (int k = 0; k < 3; ++k) {
      const auto v = gpufeed::test::pattern<std::uint8_t>(rows[k] * row, 40 + k);
      const auto path = dir / ("s" + std::to_string(k) + ".h5");
      h5_file f(path);
      dataset_spec s;
      s.dims = {rows[k], row};
      if (k == 0) {
        s.chunk = {300, 128};
        s.shuffle = true;
        s.deflate = 1;
      }
      if (k == 2) {
        s.chunk = {20, row};
        s.deflate = 1;
      }
      f.add(s, v);
      for (auto& r : gpufeed::test::rows_of(v, row)) expected.push_back(std::move(r));
      paths.push_back(path);
    }
  }
};

loader_config config_of(sample_order order, bool drop_last) {
  loader_config c;
  c.batch_size = 24;
  c.order = order;
  c.seed = 5;
  c.drop_last = drop_last;
  c.prefetch = 3;
  c.shuffle_window = 2;
  return c;
}

}  // namespace

TEST_CASE("hdf5 decode_unit: the band of chunks covering a record's rows") {
  const shards d;
  const hdf5_source src(d.paths);
  for (std::uint64_t i = 0; i < 1000; i += 7)
    for (std::uint64_t j = i; j < 1000; j += 13)
      REQUIRE((src.decode_unit(i) == src.decode_unit(j)) == (i / 300 == j / 300));
  for (std::uint64_t i = 1000; i < 1700; ++i) REQUIRE(src.decode_unit(i) == i);
  CHECK(src.decode_unit(1700) == src.decode_unit(1719));
  CHECK(src.decode_unit(1719) != src.decode_unit(1720));
  CHECK(src.decode_unit(999) != src.decode_unit(1700));
  // The median over 15 evenly spaced records: 7 in s0 (bands of 300, one of 100), 5 alone in
  // s1, 3 in s2's bands of 20.
  CHECK(detail::records_per_decode_unit(src) == 20);
}

TEST_CASE("hdf5 block_shuffled: units are bands, or blocks of contiguous rows") {
  const shards d;
  const hdf5_source src(d.paths);
  loader_config c = config_of(sample_order::block_shuffled, false);
  c.part = partition{};
  loader<hdf5_source> l(src, c);
  const record_units& u = l.batch_sampler().units();
  std::vector<std::uint64_t> starts;
  for (std::uint64_t k = 0; k < u.size(); ++k) starts.push_back(u.begin(k));
  // s0's bands of 300 (each more than a block); from 900 blocks of 256 rows, the last band of
  // s0 and s1's rows together; the block from 1668 runs into s2 and on to the end of the band
  // [1920, 1940) it would split; the last one to the end.
  const std::vector<std::uint64_t> want = {0, 300, 600, 900, 1156, 1412, 1668, 1940};
  CHECK(starts == want);
  CHECK(l.batch_sampler().window() == 2);
  CHECK(l.stats().order_units == want.size());
}

TEST_CASE("hdf5: resume at other world sizes and workers, every record's bytes exactly once") {
  const shards d;
  const hdf5_source src(d.paths);
  const std::vector<std::vector<leg>> schedules = {
      {{4, 3, 2}, {2, 0, 3}},                        // 4 -> 2
      {{4, 4, 1}, {3, 0, 2}},                        // 4 -> 3
      {{2, 6, 3}, {8, 0, 1}},                        // 2 -> 8
      {{3, 2, 1}, {4, 3, 2}, {1, 5, 4}, {2, 0, 2}},  // several resumes
  };
  // Shuffled decodes a 300-row band per record of s0 (what block_shuffled avoids): one
  // schedule is enough for it.
  for (auto order : {sample_order::block_shuffled, sample_order::shuffled}) {
    for (bool drop : {false, true}) {
      if (order == sample_order::shuffled && drop) continue;
      CAPTURE(to_string(order));
      CAPTURE(drop);
      const loader_config c = config_of(order, drop);
      const auto ref = test::reference_sequence(src, c, 2);
      REQUIRE(ref.size() == src.size());
      for (const auto& legs : schedules) {
        if (order == sample_order::shuffled && &legs != &schedules[0]) continue;
        const auto run = test::run_legs(src, c, sampler_state{5, 2, 0}, legs,
                                        [&](std::uint64_t i, std::span<const std::byte> r) {
                                          const auto& want = d.expected[i];
                                          REQUIRE(r.size() == want.size());
                                          REQUIRE(std::equal(want.begin(), want.end(), r.begin()));
                                        });
        test::check_exactly_once(run, ref, drop, c.batch_size);
      }
    }
  }
}
