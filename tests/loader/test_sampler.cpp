#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "gpufeed/detail/order/sequence.hpp"
#include "gpufeed/detail/order/units.hpp"
#include "gpufeed/sampler.hpp"

using namespace gpufeed;

namespace {
struct test_only_plain {  // 100 records, no decode units
  std::uint64_t size() const { return 100; }
  std::size_t record_size(std::uint64_t) const { return 1; }
  void read(std::uint64_t, std::span<std::byte>) const {}
};
struct test_only_chunks : test_only_plain {  // 1000 records, chunks of 12
  std::uint64_t size() const { return 1000; }
  std::uint64_t decode_unit(std::uint64_t i) const { return i / 12; }
};
}  // namespace

TEST_CASE("the keyed permutation is a bijection for every size") {
  for (std::uint64_t n = 1; n <= 600; ++n) {
    detail::feistel_permutation p(n, n * 7 + 1);
    std::vector<char> seen(n, 0);
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto v = p(i);
      REQUIRE(v < n);
      REQUIRE_FALSE(seen[v]);
      seen[v] = 1;
    }
  }
  const std::uint64_t big = 1'000'003;
  detail::feistel_permutation p(big, 42);
  std::vector<bool> seen(big);
  for (std::uint64_t i = 0; i < big; ++i) {
    const auto v = p(i);
    REQUIRE(v < big);
    REQUIRE_FALSE(seen[v]);
    seen[v] = true;
  }
}

TEST_CASE("the permutation actually shuffles") {
  detail::feistel_permutation p(10000, 1);
  int fixed_points = 0;
  std::uint64_t displacement = 0;
  for (std::uint64_t i = 0; i < 10000; ++i) {
    fixed_points += p(i) == i;
    displacement += p(i) > i ? p(i) - i : i - p(i);
  }
  CHECK(fixed_points < 20);               // ~1 expected
  CHECK(displacement / 10000 > 2000);     // ~3333 expected for a random permutation
}

static std::vector<std::uint64_t> epoch_order(const sampler& s, std::uint64_t epoch) {
  std::vector<std::uint64_t> all, buf(s.batch_size());
  for (std::uint64_t b = 0; b < s.batches_per_epoch(); ++b) {
    const auto n = s.batch(epoch, b, buf);
    all.insert(all.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return all;
}

TEST_CASE("same seed and epoch give the same order; another epoch or seed another order") {
  sampler a(1000, 32, {.seed = 5, .part = partition{}});
  sampler b(1000, 32, {.seed = 5, .part = partition{}});
  sampler c(1000, 32, {.seed = 6, .part = partition{}});
  CHECK(epoch_order(a, 3) == epoch_order(b, 3));
  CHECK(epoch_order(a, 3) != epoch_order(a, 4));
  CHECK(epoch_order(a, 3) != epoch_order(c, 3));
  auto sorted = epoch_order(a, 3);
  std::sort(sorted.begin(), sorted.end());
  for (std::uint64_t i = 0; i < 1000; ++i) CHECK(sorted[i] == i);
}

TEST_CASE("sequential order keeps record order") {
  sampler s(10, 4, {.order = sample_order::sequential, .part = partition{}});
  CHECK(s.batches_per_epoch() == 3);
  CHECK(epoch_order(s, 0) == std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(s.batch_records(2) == 2);
}

TEST_CASE("ranks: equal batch counts, no repeats within a rank, union is the dataset") {
  for (std::uint64_t n : {1u, 7u, 100u, 101u, 1023u}) {
    for (std::uint32_t world : {1u, 2u, 3u, 4u, 7u}) {
      if (n < world) continue;
      for (std::uint64_t bs : {1u, 3u, 16u}) {
        for (bool drop : {false, true}) {
          std::set<std::uint64_t> uni;
          std::optional<std::uint64_t> batches;
          bool any_batches = true;
          for (std::uint32_t r = 0; r < world; ++r) {
            sampler s(n, bs, {.seed = 9, .drop_last = drop, .part = partition{r, world}});
            if (batches) CHECK(*batches == s.batches_per_epoch());
            batches = s.batches_per_epoch();
            any_batches = s.batches_per_epoch() > 0;
            const auto order = epoch_order(s, 2);
            CHECK(order.size() == s.records_per_epoch());
            std::set<std::uint64_t> mine(order.begin(), order.end());
            CHECK(mine.size() == order.size());  // no record twice within a rank
            uni.insert(order.begin(), order.end());
          }
          if (!drop) CHECK(uni.size() == n);  // every record reaches some rank
          if (drop && any_batches) CHECK(uni.size() >= (n / world / bs) * bs * world);
        }
      }
    }
  }
}

namespace {

// The global sequence of `epoch` as ranks at the world sizes of `legs` ({world, rounds}; the
// last leg runs to the end of the epoch) deliver it: their batches, round by round, in rank
// order. Checks that every rank has the same batches left and the same next state.
std::vector<std::uint64_t> elastic(std::uint64_t n, std::uint64_t bs, sampler_options o,
                                   const record_units& units,
                                   const std::vector<std::pair<std::uint32_t, std::uint64_t>>& legs,
                                   std::uint32_t& last_world) {
  std::vector<std::uint64_t> seq, buf(bs);
  sampler_state at{o.seed, 3, 0};
  for (std::size_t g = 0; g < legs.size() && at.epoch == 3; ++g) {
    const auto [world, rounds] = legs[g];
    last_world = world;
    std::vector<sampler> ranks;
    for (std::uint32_t r = 0; r < world; ++r) {
      sampler_options ro = o;
      ro.part = partition{r, world};
      ranks.emplace_back(n, bs, ro, units);
    }
    at = ranks[0].resumed(at);
    for (std::uint64_t k = 0; at.epoch == 3 && (g + 1 == legs.size() || k < rounds); ++k) {
      const std::uint64_t left = ranks[0].batches_left(at);
      REQUIRE(left > 0);
      for (const sampler& s : ranks) {
        REQUIRE(s.batches_left(at) == left);  // equal batch counts per rank
        REQUIRE(s.batch_records(at) == ranks[0].batch_records(at));
        const auto got = s.batch(at, buf);
        seq.insert(seq.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(got));
        REQUIRE(s.advance(at) == ranks[0].advance(at));  // one state on every rank
      }
      at = ranks[0].advance(at);
    }
  }
  return seq;
}

std::vector<std::uint64_t> whole(std::uint64_t n, sampler_options o, const record_units& units) {
  o.part = partition{};
  const sampler s(n, 1, o, units);
  std::vector<std::uint64_t> seq;
  for (std::uint64_t p = 0; p < n; ++p) seq.push_back(s.record_at(3, p));
  return seq;
}

// Units of random lengths 1..max covering n records.
record_units random_units(std::uint64_t n, std::uint64_t max, std::uint64_t seed) {
  std::vector<std::uint64_t> starts;
  std::uint64_t x = seed;
  for (std::uint64_t s = 0; s < n; s += 1 + (x = detail::mix64(x)) % max) starts.push_back(s);
  return record_units::from_starts(std::move(starts), n);
}

}  // namespace

TEST_CASE("one global sequence: any sequence of world sizes within an epoch delivers it once") {
  std::uint64_t schedule_seed = 1;
  for (std::uint64_t n : {1u, 5u, 97u, 1000u}) {
    for (std::uint64_t bs : {1u, 3u, 16u}) {
      for (auto order :
           {sample_order::shuffled, sample_order::sequential, sample_order::block_shuffled}) {
        for (bool drop : {false, true}) {
          CAPTURE(n);
          CAPTURE(bs);
          CAPTURE(to_string(order));
          CAPTURE(drop);
          const sampler_options o{.order = order, .seed = 11, .drop_last = drop, .window = 3};
          const record_units units = random_units(n, 9, n + bs);
          const auto ref = whole(n, o, units);
          std::vector<char> seen(n, 0);
          for (auto r : ref) {
            REQUIRE(r < n);
            REQUIRE_FALSE(seen[r]);  // a bijection of [0, n)
            seen[r] = 1;
          }
          // 4 -> 2, 4 -> 3, 2 -> 8, and random schedules of several resumes.
          std::vector<std::vector<std::pair<std::uint32_t, std::uint64_t>>> schedules = {
              {{4, 2}, {2, 0}}, {{4, 3}, {3, 0}}, {{2, 4}, {8, 0}}, {{1, 0}}};
          for (int k = 0; k < 6; ++k) {
            std::vector<std::pair<std::uint32_t, std::uint64_t>> legs;
            for (int g = 0; g < 4; ++g) {
              schedule_seed = detail::mix64(schedule_seed);
              legs.emplace_back(1 + schedule_seed % 8, (schedule_seed >> 8) % 4);
            }
            schedules.push_back(legs);
          }
          for (auto legs : schedules) {
            for (auto& [w, r] : legs) w = std::min<std::uint32_t>(w, static_cast<std::uint32_t>(n));
            std::uint32_t last = 1;
            const auto seq = elastic(n, bs, o, units, legs, last);
            if (!drop) {
              REQUIRE(seq.size() >= n);
              CHECK(seq.size() - n < last);  // the padded last round repeats < world records
              for (std::size_t p = 0; p < seq.size(); ++p) REQUIRE(seq[p] == ref[p % n]);
            } else {
              REQUIRE(seq.size() <= n);
              CHECK(n - seq.size() < last * bs);
              for (std::size_t p = 0; p < seq.size(); ++p) REQUIRE(seq[p] == ref[p]);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("ranks take interleaved batches of the global sequence") {
  const sampler_options o{.seed = 4};
  std::vector<std::uint64_t> buf(5);
  for (std::uint32_t r = 0; r < 3; ++r) {
    sampler_options ro = o;
    ro.part = partition{r, 3};
    const sampler s(100, 5, ro);
    CHECK(s.batches_per_epoch() == 7);  // 6 rounds of 15, then 10 positions: 4, 4, 4 (2 again)
    CHECK(s.batch(2, 1, buf) == 5);
    for (std::uint64_t k = 0; k < 5; ++k) CHECK(buf[k] == s.record_at(2, 15 + 5 * r + k));
    const sampler_state last{4, 2, 90};
    CHECK(s.batch_records(last) == 4);
    CHECK(s.batch(last, buf) == 4);
    for (std::uint64_t k = 0; k < 4; ++k) CHECK(buf[k] == s.record_at(2, (90 + 4 * r + k) % 100));
    CHECK(s.advance(last) == sampler_state{4, 3, 0});
    CHECK(s.records_per_epoch() == 34);
  }
}

TEST_CASE("block_shuffled: each window's positions hold exactly its units' records") {
  // 10 units of 7 records, windows of 4 units: positions [0, 28), [28, 56) and [56, 70) each
  // cover whole units, and are shuffled within.
  const record_units units = record_units::uniform(70, 7);
  const sampler s(70, 8, {.order = sample_order::block_shuffled, .seed = 2, .part = partition{},
                          .window = 4}, units);
  for (std::uint64_t epoch : {0u, 1u}) {
    std::set<std::uint64_t> all;
    std::uint64_t begin = 0;
    bool shuffled_within = false;
    for (std::uint64_t w = 0; begin < 70; ++w) {
      std::set<std::uint64_t> unit_ids;
      std::uint64_t count = 0;
      std::uint64_t end = begin;
      for (; count < (w < 2 ? 28u : 14u); ++end, ++count) {
        const auto r = s.record_at(epoch, end);
        unit_ids.insert(r / 7);
        all.insert(r);
        if (end > begin && r != s.record_at(epoch, end - 1) + 1) shuffled_within = true;
      }
      std::uint64_t records = 0;
      for (auto u : unit_ids) records += units.end(u) - units.begin(u);
      CHECK(records == count);  // whole units, nothing else
      CHECK(unit_ids.size() == (w < 2 ? 4u : 2u));
      begin = end;
    }
    CHECK(all.size() == 70);
    CHECK(shuffled_within);
  }
  std::vector<std::uint64_t> e0, e1;
  for (std::uint64_t p = 0; p < 70; ++p) e0.push_back(s.record_at(0, p));
  for (std::uint64_t p = 0; p < 70; ++p) e1.push_back(s.record_at(1, p));
  CHECK(e0 != e1);
  const sampler again(70, 3, {.order = sample_order::block_shuffled, .seed = 2,
                              .part = partition{1, 2}, .window = 4}, units);
  for (std::uint64_t p = 0; p < 70; ++p) CHECK(again.record_at(0, p) == e0[p]);  // (seed, epoch)
}

TEST_CASE("block_shuffled edge cases: one unit, units of one record, window past the units") {
  for (std::uint64_t n : {1u, 2u, 61u}) {
    const std::vector<record_units> cases = {record_units::uniform(n, n),  // one unit
                                             record_units::uniform(n, 1),  // one record each
                                             record_units::uniform(n, 5)};
    for (const auto& units : cases) {
      for (std::uint64_t window : {1u, 3u, 1000u}) {
        const sampler s(n, 4, {.order = sample_order::block_shuffled, .seed = 9,
                               .part = partition{}, .window = window}, units);
        CHECK(s.window() == std::min<std::uint64_t>(window, units.size()));
        std::set<std::uint64_t> seen;
        for (std::uint64_t p = 0; p < n; ++p) seen.insert(s.record_at(5, p));
        CHECK(seen.size() == n);
        CHECK(*seen.rbegin() == n - 1);
      }
    }
  }
  CHECK_THROWS_AS(sampler(6, 4, {.order = sample_order::block_shuffled, .part = partition{}},
                          record_units::uniform(7, 1)),
                  config_error);
}

TEST_CASE("block_shuffled over uniform units: the sequence the unit search gave, computed") {
  // Uncompressed data has units of one record or of one storage block each (all of one size
  // but the last): the slot of a position is then computed, not searched, and with a unit per
  // record no per-epoch table is kept. These hashes were taken from the searched sequence (fill
  // from 0 and across the epoch's end, each window's bounds and units, window_of): the same
  // seed and epoch must give the same records, so a resumed run delivers what it would have.
  struct golden {
    std::uint64_t n, per_unit, window, seed, epoch, fill, windows, window_of;
  };
  const golden cases[] = {
      {1, 1, 1, 0, 0, 0x9a691300c548b8fbull, 0x0000000000000083ull, 0x0000000000000000ull},
      {97, 1, 10, 3, 1, 0x354d1b34068ed691ull, 0xdb0e38027239936bull, 0x00002312d1965ccaull},
      {1000, 1, 64, 42, 0, 0x4dd26d1063874becull, 0x764a3ff2620f3d98ull, 0xcd06a9357fb353d1ull},
      {1000, 1, 64, 42, 7, 0x744ab7bbace6ae84ull, 0x681a840fc8061580ull, 0xcd06a9357fb353d1ull},
      {4096, 1, 1000, 9, 2, 0x47911c537a98c272ull, 0xc04378f3c47cb986ull, 0x243b27de49af1bb2ull},
      {100003, 1, 4096, 1234567, 5, 0xf492cb0a605ac35full, 0x21ded73abc87c774ull, 0x8e5feee46684aa46ull},
      {5000, 1, 5000, 1, 1, 0x70763c1f1531daebull, 0x34e557ec295ea270ull, 0x0000000000000000ull},
      {5000, 1, 9999, 1, 1, 0x70763c1f1531daebull, 0x34e557ec295ea270ull, 0x0000000000000000ull},
      {10, 3, 2, 0, 0, 0x8436f0a2794991f9ull, 0x0000000cc53bb82aull, 0x0000000000000001ull},
      {97, 10, 3, 3, 1, 0xbfc9d5b22e0b11e2ull, 0xee6266510ea363d0ull, 0x0000001d562af580ull},
      {1000, 64, 5, 42, 0, 0x4628d5f6fdc11840ull, 0x0aea1da9ce6160d0ull, 0x23b37e79017b91b1ull},
      {1024, 64, 5, 42, 7, 0x16e2dab00d2465d9ull, 0x938a834a1acfde68ull, 0x22a4ed9c7f8e0455ull},
      {100003, 4096, 7, 9, 2, 0xfb9096e159fa2389ull, 0x47e8924fd65c73f7ull, 0xf7d78a995bc8de4full},
      {262144, 4096, 64, 1234567, 5, 0x8ebd48db679647e6ull, 0xa079c491b1a40e0eull, 0x0000000000000000ull},
      {5000, 7, 1000, 1, 1, 0xc8e02b3e35dee6edull, 0xd1862275cf6a2b19ull, 0x0000000000000000ull},
      {5001, 5000, 1, 1, 1, 0x625875f2a5a8c91full, 0x00000000001230a4ull, 0x3184a78a4c12ff9aull},
  };
  for (const golden& c : cases)
    for (const bool stride : {true, false}) {
      CAPTURE(c.n);
      CAPTURE(c.per_unit);
      CAPTURE(c.window);
      record_units u = record_units::uniform(c.n, c.per_unit);
      if (!stride) {
        std::vector<std::uint64_t> starts;
        for (std::uint64_t i = 0; i < c.n; i += c.per_unit) starts.push_back(i);
        u = record_units::from_starts(std::move(starts), c.n);
      }
      const detail::epoch_sequence seq(sample_order::block_shuffled, c.n, c.seed, u, c.window);
      const auto mix = [](std::uint64_t h, std::uint64_t v) { return (h ^ v) * 1099511628211ull; };
      std::vector<std::uint64_t> out(c.n);
      seq.fill(c.epoch, 0, out);
      std::uint64_t h = 1469598103934665603ull;
      for (const auto v : out) h = mix(h, v);
      std::vector<std::uint64_t> wrap(c.n < 50 ? c.n : 50);
      seq.fill(c.epoch, c.n - wrap.size() / 2, wrap);
      for (const auto v : wrap) h = mix(h, v);
      CHECK(h == c.fill);
      std::uint64_t wh = 0;
      for (std::uint64_t w = 0; w < seq.windows(); ++w) {
        const auto b = seq.window_bounds(c.epoch, w);
        wh = wh * 31 + b.first * 7 + b.second;
        seq.for_each_unit(c.epoch, w, [&](std::uint64_t x) { wh = wh * 131 + x; });
      }
      CHECK(wh == c.windows);
      std::uint64_t wo = 0;
      for (std::uint64_t p = 0; p < c.n; p += 7) wo = wo * 17 + seq.window_of(c.epoch, p);
      CHECK(wo == c.window_of);
    }
}

namespace {
// Decode units: runs of 1..20 records (as a compressed HDF5 shard's chunk bands), then single
// records (an uncompressed shard).
struct runs_source {
  std::vector<std::uint64_t> unit;
  explicit runs_source(std::uint64_t n) {
    std::uint64_t x = 3, u = 0;
    while (unit.size() < n / 2) {
      const std::uint64_t len = 1 + (x = detail::mix64(x)) % 20;
      for (std::uint64_t k = 0; k < len && unit.size() < n / 2; ++k) unit.push_back(u);
      ++u;
    }
    while (unit.size() < n) unit.push_back(1000000 + unit.size());
  }
  std::uint64_t size() const { return unit.size(); }
  std::size_t record_size(std::uint64_t) const { return 1; }
  void read(std::uint64_t, std::span<std::byte>) const {}
  std::uint64_t decode_unit(std::uint64_t i) const { return unit[i]; }
};
}  // namespace

TEST_CASE("units_of: storage blocks that never split a decode unit") {
  const runs_source src(1000);
  for (std::uint64_t block : {1u, 7u, 50u, 2000u}) {
    const record_units u = detail::units_of(src, block);
    CHECK(u.records() == 1000);
    for (std::uint64_t k = 0; k < u.size(); ++k) {
      const auto b = u.begin(k), e = u.end(k);
      REQUIRE(e > b);
      if (k + 1 < u.size()) CHECK(e - b >= block);     // at least a block, but the last
      if (b > 0) CHECK(src.unit[b - 1] != src.unit[b]);  // starts at a decode unit's start
      if (k + 1 < u.size() && e - b > block)            // ran on only to end a decode unit
        CHECK(src.unit[b + block - 1] == src.unit[b + block]);
    }
    CHECK(u.begin(0) == 0);
    CHECK(u.end(u.size() - 1) == 1000);
  }
  // With blocks of 1, the units are exactly the runs of equal decode_unit.
  const record_units runs = detail::units_of(src, 1);
  std::uint64_t count = 1;
  for (std::uint64_t i = 1; i < 1000; ++i) count += src.unit[i] != src.unit[i - 1];
  CHECK(runs.size() == count);
  CHECK(detail::units_of(test_only_plain{}, 7).size() == 15);
  CHECK(detail::records_per_decode_unit(test_only_chunks{}) == 12);
  CHECK(detail::records_per_decode_unit(test_only_plain{}) == 1);
}

TEST_CASE("advance rolls over epochs") {
  sampler s(10, 4, {.part = partition{}});
  sampler_state st{1, 0, 2};
  st = s.advance(st);
  CHECK(st == sampler_state{1, 0, 6});
  st = s.advance(st);  // 4 of 10 positions left: a round of 4 ends the epoch
  CHECK(st == sampler_state{1, 1, 0});
  CHECK(s.advance(sampler_state{1, 0, 8}) == sampler_state{1, 1, 0});
}

TEST_CASE("configuration errors") {
  CHECK_THROWS_AS(sampler(10, 0, {.part = partition{}}), config_error);
  CHECK_THROWS_AS(sampler(10, 1, {.part = partition{3, 3}}), config_error);
  CHECK_THROWS_AS(sampler(2, 1, {.part = partition{0, 3}}), config_error);
  sampler s(10, 4, {.part = partition{}});
  std::vector<std::uint64_t> buf(4);
  CHECK_THROWS_AS(s.batch(0, 3, buf), config_error);
}

TEST_CASE("rank and world from the launcher's environment") {
  auto env = [](std::map<std::string, std::string> m) {
    return [m = std::move(m)](const char* name) -> const char* {
      auto it = m.find(name);
      return it == m.end() ? nullptr : it->second.c_str();
    };
  };
  auto none = detail::rank_world_from_environment(env({}));
  CHECK(none.rank == 0);
  CHECK(none.world == 1);
  auto torchrun = detail::rank_world_from_environment(env({{"RANK", "3"}, {"WORLD_SIZE", "8"}}));
  CHECK(torchrun.rank == 3);
  CHECK(torchrun.world == 8);
  CHECK(torchrun.origin == "RANK/WORLD_SIZE");
  auto ompi = detail::rank_world_from_environment(
      env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  CHECK(ompi.rank == 1);
  auto slurm = detail::rank_world_from_environment(env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}}));
  CHECK(slurm.rank == 5);
  CHECK(slurm.world == 6);
  auto pmi = detail::rank_world_from_environment(env({{"PMI_RANK", "0"}, {"PMI_SIZE", "4"}}));
  CHECK(pmi.world == 4);
  // An explicit override wins over the launcher's.
  auto over = detail::rank_world_from_environment(
      env({{"GPUFEED_RANK", "1"}, {"GPUFEED_WORLD_SIZE", "2"}, {"RANK", "3"}, {"WORLD_SIZE", "8"}}));
  CHECK(over.world == 2);
  // Half a pair is ignored; malformed or inconsistent values are errors.
  CHECK(detail::rank_world_from_environment(env({{"RANK", "3"}})).world == 1);
  CHECK_THROWS_AS(detail::rank_world_from_environment(env({{"RANK", "x"}, {"WORLD_SIZE", "2"}})),
                  config_error);
  CHECK_THROWS_AS(detail::rank_world_from_environment(env({{"RANK", "2"}, {"WORLD_SIZE", "2"}})),
                  config_error);
  CHECK_THROWS_AS(detail::rank_world_from_environment(env({{"RANK", "-1"}, {"WORLD_SIZE", "2"}})),
                  config_error);
}
