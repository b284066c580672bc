// The loader's error transport, error policies and shutdown behaviour (host target).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/loader.hpp"
#include "memory_source.hpp"
#include "mock_engine.hpp"
#include "watchdog.hpp"

using namespace gpufeed;
using test::memory_source;

namespace {
loader_config sequential(std::size_t batch) {
  loader_config c;
  c.batch_size = batch;
  c.order = sample_order::sequential;
  c.part = partition{};
  c.epochs = 1;
  c.workers = 4;
  return c;
}
}  // namespace

TEST_CASE("throw policy: the error reaches the consumer at the batch it broke, then it goes on") {
  memory_source src(100, 16);
  src.fail = [](std::uint64_t i) { return i == 37; };
  loader<memory_source> l(src, sequential(10));
  std::vector<std::uint64_t> numbers;
  int errors = 0;
  for (;;) {
    try {
      auto b = l.next();
      if (!b) break;
      numbers.push_back(b->number());
      for (std::size_t k = 0; k < b->size(); ++k) CHECK(src.matches(b->indices()[k], b->record(k)));
    } catch (const corrupt_error& e) {
      ++errors;
      CHECK(e.record() == 37u);
      CHECK(e.file() == "memory://test");
      CHECK(numbers.size() == 3);  // batches 0, 1, 2 came first
      CHECK(l.state().position == 40);  // the broken batch counts as delivered
    }
  }
  CHECK(errors == 1);
  CHECK(numbers == std::vector<std::uint64_t>{0, 1, 2, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("skip policy: failed records are left out and logged; the rest arrive exactly once") {
  memory_source src(200, 0, 50);  // variable size: compaction moves bytes
  src.fail = [](std::uint64_t i) { return i % 23 == 4; };
  loader_config c = sequential(16);
  c.on_error = error_policy::skip;
  c.order = sample_order::shuffled;
  loader<memory_source> l(src, c);
  std::multiset<std::uint64_t> got;
  std::set<std::uint64_t> logged;
  while (auto b = l.next()) {
    for (std::size_t k = 0; k < b->size(); ++k) {
      const auto i = b->indices()[k];
      CHECK(src.matches(i, b->record(k)));
      CHECK(b->labels()[k] == src.label(i));
      got.insert(i);
    }
    CHECK(b->offsets()[b->size()] == b->data().size());
    for (const auto& s : b->skipped()) {
      CHECK_FALSE(s.substituted);
      CHECK(s.what.find("record " + std::to_string(s.index)) != std::string::npos);
      CHECK(s.epoch == 0);
      logged.insert(s.index);
    }
  }
  for (std::uint64_t i = 0; i < 200; ++i) {
    if (i % 23 == 4) {
      CHECK(got.count(i) == 0);
      CHECK(logged.count(i) == 1);
    } else {
      CHECK(got.count(i) == 1);
    }
  }
  const auto s = l.stats();
  CHECK(s.skipped == logged.size());
  CHECK(s.skipped_log.size() == logged.size());
}

TEST_CASE("substitute policy: batches keep their size; each hole holds another good record") {
  memory_source src(128, 32);
  src.fail = [](std::uint64_t i) { return i % 10 == 3; };
  loader_config c = sequential(16);
  c.on_error = error_policy::substitute;
  loader<memory_source> l(src, c);
  std::size_t substituted = 0;
  while (auto b = l.next()) {
    CHECK(b->size() == 16);
    for (std::size_t k = 0; k < b->size(); ++k) {
      const auto i = b->indices()[k];
      CHECK(i % 10 != 3);                       // the failed record is gone...
      CHECK(src.matches(i, b->record(k)));      // ...and indices describe the bytes truthfully
      CHECK(b->labels()[k] == src.label(i));
    }
    for (const auto& s : b->skipped()) {
      CHECK(s.substituted);
      CHECK(s.index % 10 == 3);
      CHECK(s.substitute_index % 10 != 3);
      ++substituted;
    }
  }
  CHECK(substituted == 13);  // 3, 13, ..., 123
  CHECK(l.stats().substituted == 13);
}

TEST_CASE("substitute falls back to skip when no record of the same size exists") {
  memory_source src(30, 0, 1000);  // sizes 1 + 37 i mod 1000: all distinct here
  src.fail = [](std::uint64_t i) { return i == 5; };
  loader_config c = sequential(10);
  c.on_error = error_policy::substitute;
  loader<memory_source> l(src, c);
  auto b = l.next();
  REQUIRE(b);
  CHECK(b->size() == 9);
  REQUIRE(b->skipped().size() == 1);
  CHECK_FALSE(b->skipped()[0].substituted);
}

TEST_CASE("a failing transform fails its batch") {
  memory_source src(40, 8);
  loader_config c = sequential(10);
  c.transform = [](const batch_view& v, stream_handle) {
    if (v.indices[0] == 20) throw format_error("transform refused batch");
  };
  loader<memory_source> l(src, c);
  int ok = 0, failed = 0;
  for (;;) {
    try {
      if (!l.next()) break;
      ++ok;
    } catch (const format_error&) {
      ++failed;
    }
  }
  CHECK(ok == 3);
  CHECK(failed == 1);
}

TEST_CASE("a batch that cannot fit its slot is a typed error at that batch") {
  memory_source src(40, 0, 100);
  loader_config c = sequential(10);
  c.slot_data_bytes = 400;  // some batches need more
  loader<memory_source> l(src, c);
  int errors = 0, ok = 0;
  for (;;) {
    try {
      auto b = l.next();
      if (!b) break;
      ++ok;
    } catch (const config_error& e) {
      ++errors;
      CHECK(std::string(e.what()).find("slot_data_bytes") != std::string::npos);
    }
  }
  CHECK(errors + ok == 4);
  CHECK(errors >= 1);
}

TEST_CASE("destroying a loader mid-epoch returns promptly and leaks nothing") {
  memory_source src(100000, 4096);
  src.delay_us = 500;  // 0.5 ms per record: a full epoch would take minutes
  loader_config c;
  c.batch_size = 64;
  c.part = partition{};
  c.workers = 4;
  c.prefetch = 4;
  std::atomic<std::uint64_t> reads{0};
  src.fail = [&](std::uint64_t) {
    reads.fetch_add(1);
    return false;
  };
  std::optional<batch> kept;
  const auto t0 = std::chrono::steady_clock::now();
  {
    loader<memory_source> l(src, c);
    kept = l.next();
    REQUIRE(kept);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Counted, not timed (holds under sanitizers and on a loaded machine): the records read before
  // the destructor returned are at most the batches the loader may have in flight (the kept one,
  // prefetch, the one being planned) plus a task per worker — not the epoch's 100 000. A
  // destructor that drained the epoch would count them all.
  const std::uint64_t in_flight = (1 + c.prefetch + 1) * c.batch_size + c.workers * c.batch_size;
  CHECK(reads.load() <= in_flight);
  MESSAGE("destroyed after " << reads.load() << " reads in " << seconds << " s");
  // A batch may outlive its loader: its slot stays valid until released.
  for (std::size_t k = 0; k < kept->size(); ++k) CHECK(src.matches(kept->indices()[k], kept->record(k)));
  kept.reset();
}

TEST_CASE("moving a loader keeps it running") {
  memory_source src(50, 4);
  loader_config c = sequential(10);
  loader<memory_source> a(src, c);
  auto first = a.next();
  REQUIRE(first);
  first.reset();
  loader<memory_source> b(std::move(a));
  int n = 1;
  while (auto x = b.next()) ++n;
  CHECK(n == 5);
}

// Regression: a failed batch's slots were returned twice (once when it failed, once when the
// consumer received the error), so two later batches shared one slot: the consumer hung in
// next() or received another batch's indices and bytes. Every batch after an error must still be
// exactly the sequential batch it claims to be, and the epoch must end.
TEST_CASE("after failed batches the loader neither hangs nor hands out another batch's records") {
  for (const bool hook_fails : {false, true})
  for (const bool staged : {false, true}) {  // host target; a transfer engine (device path)
    CAPTURE(hook_fails);
    CAPTURE(staged);
    memory_source src(600, 64);
    if (!hook_fails) src.fail = [](std::uint64_t i) { return i % 30 == 7; };
    loader_config c = sequential(10);
    c.workers = 1;
    c.prefetch = 2;
    c.max_held_batches = 1;
    c.epochs = 3;
    if (staged) c.target = test::mock_target(std::chrono::microseconds(50));
    if (hook_fails)
      c.transform = [](const batch_view& v, stream_handle) {
        if (v.indices[0] % 30 == 0) throw format_error("transform refused batch");
      };
    loader<memory_source> l(src, c);
    std::vector<std::uint64_t> good, failed;
    const test::watchdog dog(std::chrono::seconds(60), "next() after a failed batch");
    for (;;) {
      try {
        auto b = l.next();
        if (!b) break;
        REQUIRE(b->size() == 10);
        const std::uint64_t first = b->number() * 10;
        for (std::size_t k = 0; k < b->size(); ++k) {
          REQUIRE(b->indices()[k] == first + k);
          REQUIRE(src.matches(b->indices()[k], b->record(k)));
        }
        good.push_back(b->epoch() * 60 + b->number());
      } catch (const error&) {
        failed.push_back(l.state().epoch * 60 + l.state().position / 10);
      }
    }
    // Every third batch holds a failing record (7, 37, ...): batches 0, 3, 6, ... fail.
    CHECK(failed.size() == 60);
    CHECK(good.size() == 120);
    for (std::size_t k = 1; k < good.size(); ++k) CHECK(good[k] > good[k - 1]);
  }
}

namespace {
// A source whose per-thread readers cannot be made (as an lmdb_source's in a forked child).
struct readerless_source : memory_source {
  using memory_source::memory_source;
  struct reader {
    void read(std::uint64_t, std::span<std::byte>) {}
  };
  reader make_reader() const { throw config_error("this source gives no reader here"); }
};
}  // namespace

TEST_CASE("a worker that cannot start fails every batch with its error: no abort, no hang") {
  test::watchdog dog(std::chrono::seconds(60), "workers without readers");
  readerless_source src(100, 16);
  for (const error_policy policy : {error_policy::skip, error_policy::throw_error}) {
    loader_config c = sequential(10);
    c.on_error = policy;
    loader<readerless_source> l(src, c);
    int errors = 0;
    for (;;) {
      try {
        if (!l.next()) break;
        FAIL_CHECK("a batch was delivered without a reader");
      } catch (const config_error& e) {
        ++errors;
        CHECK(std::string(e.what()).find("gives no reader") != std::string::npos);
      }
    }
    CHECK(errors == 10);
  }
}
