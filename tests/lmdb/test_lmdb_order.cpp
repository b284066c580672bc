// The epoch orders on LMDB shards through the real loader: block_shuffled over storage blocks of
// contiguous keys, and an epoch resumed at other world sizes and worker counts delivering every
// value exactly once.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "elastic_check.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/loader.hpp"
#include "lmdb_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using namespace gpufeed::test;

TEST_CASE("lmdb: block_shuffled and shuffled resume at other world sizes, each value once") {
  temp_dir dir("lmord");
  std::vector<std::filesystem::path> paths;
  std::vector<std::string> values;
  std::mt19937_64 rng(8);
  for (int k = 0; k < 3; ++k) {
    kv_list kv;
    for (int i = 0; i < 500; ++i) {
      values.push_back(random_bytes(rng, 1000 + rng() % 8000));
      kv.emplace_back(key8(static_cast<std::uint64_t>(i)), values.back());
    }
    paths.push_back(dir / ("s" + std::to_string(k)));
    write_lmdb(paths.back(), kv);
  }
  const lmdb_source src(paths);
  REQUIRE(src.size() == 1500);
  const std::vector<std::vector<leg>> schedules = {
      {{4, 3, 2}, {2, 0, 3}}, {{4, 2, 1}, {3, 0, 2}}, {{2, 5, 2}, {8, 0, 1}},
      {{4, 1, 1}, {2, 4, 3}, {3, 2, 1}, {1, 0, 2}}};
  for (auto order : {sample_order::block_shuffled, sample_order::shuffled}) {
    for (bool drop : {false, true}) {
      CAPTURE(to_string(order));
      CAPTURE(drop);
      loader_config c;
      c.batch_size = 20;
      c.order = order;
      c.seed = 3;
      c.drop_last = drop;
      c.prefetch = 3;
      c.shuffle_window = 3;
      if (order == sample_order::block_shuffled) {
        loader_config one = c;
        one.part = partition{};
        loader<lmdb_source> l(src, one);
        // Blocks of 1 MiB / max value size (<= 8999 bytes): at least 116 records each.
        CHECK(l.batch_sampler().units().size() >= 10);
        CHECK(l.batch_sampler().units().max_records() >= 116);
      }
      const auto ref = reference_sequence(src, c, 0);
      REQUIRE(ref.size() == src.size());
      for (const auto& legs : schedules) {
        const auto run = run_legs(src, c, sampler_state{3, 0, 0}, legs,
                                  [&](std::uint64_t i, std::span<const std::byte> r) {
                                    REQUIRE(as_string(r) == values[i]);
                                  });
        check_exactly_once(run, ref, drop, c.batch_size);
      }
    }
  }
}
