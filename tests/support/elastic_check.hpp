// Elastic-resume checks through the real loader: an epoch run in legs at different world sizes
// (each leg: `world` loaders, one per rank, resumed from the state the previous leg left), with
// every rank's batches and state compared, and the ranks' batches, concatenated round by round
// in rank order, returned as the global sequence they delivered.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "gpufeed/loader.hpp"

namespace gpufeed::test {

struct leg {
  std::uint32_t world = 1;
  std::size_t steps = 0;    // batches per rank; 0 = to the end of the epoch
  std::size_t workers = 1;
};

struct elastic_run {
  std::vector<std::uint64_t> sequence;  // the ranks' batches, round by round, rank order
  sampler_state end;                    // the state after the last leg
  std::uint32_t last_world = 1;
};

// Runs epoch `start.epoch` of `base` (its order, seed, batch size, drop_last) from `start`
// through `legs`; check(index, bytes) sees every delivered record.
template <class Source, class Check>
elastic_run run_legs(const Source& src, const loader_config& base, sampler_state start,
                     const std::vector<leg>& legs, Check&& check) {
  elastic_run out;
  sampler_state at = start;
  const std::uint64_t epoch = start.epoch;
  for (const leg& g : legs) {
    std::vector<std::unique_ptr<loader<Source>>> ranks;
    for (std::uint32_t r = 0; r < g.world; ++r) {
      loader_config c = base;
      c.part = partition{r, g.world};
      c.resume = at;
      c.epochs = epoch + 1;
      c.workers = g.workers;
      ranks.push_back(std::make_unique<loader<Source>>(src, c));
    }
    const std::uint64_t left = ranks[0]->batch_sampler().batches_left(at);
    for (const auto& l : ranks) CHECK(l->batch_sampler().batches_left(at) == left);
    for (std::size_t step = 0; g.steps == 0 || step < g.steps; ++step) {
      std::size_t ended = 0;
      std::optional<std::size_t> size;
      for (auto& l : ranks) {
        std::optional<batch> b = l->next();
        if (!b) {
          ++ended;
          continue;
        }
        REQUIRE(b->epoch() == epoch);
        if (size) CHECK(b->size() == *size);  // every rank's batch of a round: the same size
        size = b->size();
        for (std::size_t k = 0; k < b->size(); ++k) {
          check(b->indices()[k], b->record(k));
          out.sequence.push_back(b->indices()[k]);
        }
      }
      REQUIRE((ended == 0 || ended == ranks.size()));  // equal batch counts per rank
      if (ended) break;
    }
    at = ranks[0]->state();
    for (const auto& l : ranks) CHECK(l->state() == at);  // one state on every rank
    out.last_world = g.world;
    if (at.epoch != epoch) break;
  }
  out.end = at;
  return out;
}

// The epoch's global sequence as one rank delivers it.
template <class Source>
std::vector<std::uint64_t> reference_sequence(const Source& src, loader_config c,
                                              std::uint64_t epoch) {
  c.part = partition{};
  c.resume = sampler_state{c.seed, epoch, 0};
  c.epochs = epoch + 1;
  c.drop_last = false;
  loader<Source> l(src, c);
  std::vector<std::uint64_t> seq;
  while (auto b = l.next())
    for (auto i : b->indices()) seq.push_back(i);
  return seq;
}

// `run` delivered exactly the epoch's sequence `ref`: without drop_last, all of it and then
// fewer than last_world of its first records again (the padded last round); with drop_last, a
// prefix short of the whole by less than one round.
inline void check_exactly_once(const elastic_run& run, const std::vector<std::uint64_t>& ref,
                               bool drop_last, std::uint64_t batch_size) {
  const auto& s = run.sequence;
  if (!drop_last) {
    REQUIRE(s.size() >= ref.size());
    CHECK(s.size() - ref.size() < run.last_world);
    for (std::size_t p = 0; p < s.size(); ++p)
      REQUIRE(s[p] == ref[p < ref.size() ? p : p - ref.size()]);
  } else {
    REQUIRE(s.size() <= ref.size());
    CHECK(ref.size() - s.size() < run.last_world * batch_size);
    for (std::size_t p = 0; p < s.size(); ++p) REQUIRE(s[p] == ref[p]);
  }
}

}  // namespace gpufeed::test
