// block_shuffled's read-ahead advice over epochs of one window (detail/loader/read_ahead.hpp):
// the next epoch's window is advised in shares spread over this epoch's batches, not whole at
// each epoch's start, and still each unit once per epoch, before any of its records is read.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "gpufeed/loader.hpp"
#include "memory_source.hpp"

using namespace gpufeed;

namespace {

constexpr std::size_t record_bytes = 4096;  // 256 records make one 1 MiB storage block (unit)

// memory_source that logs, in one sequence, each advised range and each record read.
struct advised_source : test::memory_source {
  using memory_source::memory_source;
  struct event {
    bool advice;
    std::uint64_t first;  // advice: a unit's first record; read: the record
  };
  void will_need(std::uint64_t first, std::uint64_t) const noexcept {
    std::lock_guard lock(mutex);
    log.push_back({true, first});
  }
  void read(std::uint64_t i, std::span<std::byte> dst) const {
    {
      std::lock_guard lock(mutex);
      log.push_back({false, i});
    }
    memory_source::read(i, dst);
  }
  mutable std::mutex mutex;
  mutable std::vector<event> log;
};

}  // namespace

TEST_CASE("an epoch of one window: the next epoch's units advised in shares, each before reads") {
  for (const std::size_t workers : {1u, 2u}) {
    CAPTURE(workers);
    const std::uint64_t units = 4, n = 256 * units, epochs = 3;
    advised_source src(n, record_bytes);
    loader_config c;
    c.batch_size = 64;  // 16 batches per epoch
    c.order = sample_order::block_shuffled;
    c.seed = 3;
    c.workers = workers;
    c.prefetch = 2;
    c.shuffle_window = units;  // one window per epoch
    c.part = partition{};
    c.epochs = epochs;
    {
      loader<advised_source> l(src, c);
      std::uint64_t got = 0;
      while (auto b = l.next()) {
        for (std::size_t k = 0; k < b->size(); ++k)
          REQUIRE(src.matches(b->host_indices()[k], b->record(k)));
        got += b->size();
      }
      REQUIRE(got == n * epochs);
    }
    std::map<std::uint64_t, std::uint64_t> advised, reads;  // per unit's first record
    std::size_t longest_burst = 0, burst = 0, first_burst = 0;
    bool reading = false;
    for (const auto& e : src.log) {
      if (e.advice) {
        CHECK(e.first % 256 == 0);
        ++advised[e.first];
        ++burst;
        if (reading)
          longest_burst = std::max(longest_burst, burst);
        else
          first_burst = burst;
        continue;
      }
      reading = true;
      burst = 0;
      const std::uint64_t unit = e.first / 256 * 256;
      // The r-th read of a unit lies in epoch r / 256 at the earliest: that epoch's advice of
      // the unit came before it.
      INFO("record " << e.first);
      CHECK(advised[unit] >= reads[unit]++ / 256 + 1);
    }
    CHECK(first_burst == units);  // the first epoch's window, before its first batch
    CHECK(longest_burst < units);  // once reads have begun: never a window all at once
    for (std::uint64_t u = 0; u < units; ++u) CHECK(advised[u * 256] == epochs);
  }
}
