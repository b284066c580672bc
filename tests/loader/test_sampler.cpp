#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "gpufeed/sampler.hpp"

using namespace gpufeed;

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

TEST_CASE("advance rolls over epochs") {
  sampler s(10, 4, {.part = partition{}});
  sampler_state st{1, 0, 2};
  st = s.advance(st);
  CHECK(st == sampler_state{1, 1, 0});
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
