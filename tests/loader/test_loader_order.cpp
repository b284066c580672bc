// The epoch order through the real loader on an in-memory source: one global sequence that
// ranks interleave, resumed mid-epoch at other world sizes and worker counts (4 -> 2, 4 -> 3,
// 2 -> 8, several resumes in one epoch), each record exactly once; block_shuffled's units and
// window; the one-time notice and the stats fields about shuffled order on large decode units.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "elastic_check.hpp"
#include "gpufeed/loader.hpp"
#include "memory_source.hpp"

namespace loading = gpufeed::detail::loading;

using namespace gpufeed;
using gpufeed::test::leg;
using gpufeed::test::memory_source;

namespace {

// memory_source whose decode units are runs of 50 records (a compressed chunk of 50 rows).
struct chunked_source : memory_source {
  using memory_source::memory_source;
  std::uint64_t decode_unit(std::uint64_t i) const { return i / 50; }
};

loader_config config_of(sample_order order, std::size_t batch, bool drop_last) {
  loader_config c;
  c.batch_size = batch;
  c.order = order;
  c.seed = 77;
  c.drop_last = drop_last;
  c.prefetch = 3;
  c.shuffle_window = 3;
  return c;
}

template <class Source>
void check_schedules(const Source& src, sample_order order) {
  const std::vector<std::vector<leg>> schedules = {
      {{4, 3, 2}, {2, 0, 3}},             // 4 -> 2
      {{4, 2, 1}, {3, 0, 4}},             // 4 -> 3
      {{2, 5, 2}, {8, 0, 1}},             // 2 -> 8
      {{4, 1, 1}, {3, 2, 2}, {1, 3, 5}, {5, 1, 1}, {2, 0, 3}},  // several resumes
  };
  for (bool drop : {false, true}) {
    for (std::size_t batch : {7u, 16u}) {
      CAPTURE(drop);
      CAPTURE(batch);
      const loader_config c = config_of(order, batch, drop);
      const auto ref = test::reference_sequence(src, c, 1);
      CHECK(ref.size() == src.size());
      for (const auto& legs : schedules) {
        const auto run = test::run_legs(src, c, sampler_state{c.seed, 1, 0}, legs,
                                        [&](std::uint64_t i, std::span<const std::byte> r) {
                                          REQUIRE(src.matches(i, r));
                                        });
        test::check_exactly_once(run, ref, drop, batch);
        CHECK(run.end == sampler_state{c.seed, 2, 0});
      }
    }
  }
}

}  // namespace

TEST_CASE("elastic resume: shuffled, sequential, block_shuffled; other world sizes and workers") {
  const memory_source plain(1003, 24);
  check_schedules(plain, sample_order::shuffled);
  check_schedules(plain, sample_order::sequential);
  // 8 KiB records: storage blocks of 128 records, so 8 units (uniform: 7 x 128 + 107), or 7
  // (runs of three 50-record chunks: 150 records) in windows of 3.
  const memory_source large(1003, 8192);
  check_schedules(large, sample_order::block_shuffled);
  const chunked_source chunked(1003, 8192);
  check_schedules(chunked, sample_order::block_shuffled);
}

TEST_CASE("the global sequence does not depend on workers, prefetch or chunking") {
  const chunked_source src(600, 16);
  for (auto order : {sample_order::shuffled, sample_order::block_shuffled}) {
    loader_config c = config_of(order, 32, false);
    const auto a = test::reference_sequence(src, c, 0);
    c.workers = 5;
    c.prefetch = 1;
    c.chunk_records = 3;
    CHECK(a == test::reference_sequence(src, c, 0));
    CHECK(a != test::reference_sequence(src, c, 1));  // another epoch, another order
    c.seed = 78;
    CHECK(a != test::reference_sequence(src, c, 0));
  }
}

TEST_CASE("block_shuffled: units never split a decode unit; the resolved window is reported") {
  const chunked_source src(1003, 1200);  // storage blocks of 873 records (1 MiB / 1200 bytes)
  loader_config c = config_of(sample_order::block_shuffled, 16, false);
  c.part = partition{};
  c.shuffle_window = 0;  // default: 128 MiB of records, at least 4 units, at most all of them
  loader<chunked_source> l(src, c);
  const record_units& u = l.batch_sampler().units();
  REQUIRE(u.size() == 2);
  CHECK(u.begin(1) == 900);  // 873 records would split the chunk [850, 900)
  CHECK(l.batch_sampler().window() == 2);
  const loader_stats s = l.stats();
  CHECK(s.order == "block_shuffled");
  CHECK(s.order_units == 2);
  CHECK(s.shuffle_window == 2);
  CHECK(s.records_per_decode_unit == 50);
}

TEST_CASE("shuffled order on decode units of many records: a notice naming the cost and fix") {
  const chunked_source chunked(1000, 16);
  loader_config c = config_of(sample_order::shuffled, 10, false);
  c.part = partition{};
  const auto a = loading::resolve_config<default_options>(chunked, c, 4);
  CHECK(a.records_per_decode_unit == 50);
  CHECK(a.order_notice.find("hold 50 records") != std::string::npos);
  CHECK(a.order_notice.find("~50x the bytes delivered") != std::string::npos);
  CHECK(a.order_notice.find("sample_order::block_shuffled") != std::string::npos);
  // The repack it suggests makes chunks of a few records (4 x 16 bytes, at least 4 KiB), not
  // the chunks the data has now.
  CHECK(a.order_notice.find("--chunk-size 4KiB") != std::string::npos);
  CHECK(a.order_notice.find("pack --compress") == std::string::npos);
  loader<chunked_source> l(chunked, c);
  CHECK(l.stats().order == "shuffled");
  CHECK(l.stats().records_per_decode_unit == 50);
  c.order = sample_order::block_shuffled;
  CHECK(loading::resolve_config<default_options>(chunked, c, 4).order_notice.empty());
  c.order = sample_order::shuffled;
  const memory_source plain(1000, 16);  // records decode alone
  CHECK(loading::resolve_config<default_options>(plain, c, 4).order_notice.empty());
  CHECK(loading::resolve_config<default_options>(plain, c, 4).records_per_decode_unit == 1);
}

TEST_CASE("resume: a state of other records or past the epoch is a config_error") {
  const memory_source src(100, 4);
  loader_config c = config_of(sample_order::shuffled, 10, false);
  c.part = partition{};
  c.resume = sampler_state{77, 0, 100};  // the end of epoch 0: continues with epoch 1
  loader<memory_source> l(src, c);
  CHECK(l.state() == sampler_state{77, 1, 0});
  c.resume = sampler_state{77, 0, 101};
  CHECK_THROWS_AS(loader<memory_source>(src, c), config_error);
}

namespace {
// chunked_source that logs, per reading thread, the records it reads in order.
struct logging_source : chunked_source {
  using chunked_source::chunked_source;
  mutable std::mutex mutex;
  mutable std::map<std::thread::id, std::vector<std::uint64_t>> reads;
  void read(std::uint64_t i, std::span<std::byte> dst) const {
    memory_source::read(i, dst);
    std::lock_guard lock(mutex);
    reads[std::this_thread::get_id()].push_back(i);
  }
};
}  // namespace

TEST_CASE("block_shuffled over decode units: a task's records are read in record order") {
  // So a reader meets a band's records one after another and pins it once for them. Tasks are
  // cut from shuffled batches: read in batch order, a task's records would rise about half the
  // time; in record order every step within a task rises.
  logging_source src(3000, 64);
  loader_config c;
  c.batch_size = 64;
  c.order = sample_order::block_shuffled;
  c.shuffle_window = 4;
  c.workers = 1;  // one reader: its log is the tasks one after another
  c.prefetch = 2;
  c.epochs = 1;
  std::size_t batches = 0;
  {
    loader<logging_source> l(src, c);
    std::vector<std::uint64_t> seen;
    while (auto b = l.next()) {
      for (std::size_t k = 0; k < b->size(); ++k) {
        REQUIRE(src.matches(b->indices()[k], b->record(k)));
        seen.push_back(b->indices()[k]);
      }
      ++batches;
    }
    std::sort(seen.begin(), seen.end());
    CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
    CHECK(seen.size() == src.size());
  }
  REQUIRE(src.reads.size() == 1);
  const auto& log = src.reads.begin()->second;
  std::size_t falls = 0;
  for (std::size_t k = 1; k < log.size(); ++k) falls += log[k] < log[k - 1];
  // one fall at most per task boundary
  CHECK(falls < log.size() / 8);
  CHECK(falls >= 1);
}
