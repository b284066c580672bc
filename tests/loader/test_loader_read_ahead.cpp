// Read-ahead in block_shuffled order (detail/loader/read_ahead.hpp), through the real loader on
// an in-memory source that logs will_need() advice and reads: every unit is advised once per
// epoch (once more where a resume re-enters a window), before any of its records is read, and
// at most two windows ahead of the reads; other orders advise nothing. With decode ahead, each
// unit of the next window is decoded ahead once, in shares spread over this window's batches,
// none once the loader's destruction has requested stop, and none once the reads of its window
// have begun.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <thread>
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
    std::uint64_t first, count;  // advice: records [first, first + count); read: record first
  };
  void will_need(std::uint64_t first, std::uint64_t count) const noexcept {
    std::lock_guard lock(mutex);
    log.push_back({true, first, count});
  }
  void read(std::uint64_t i, std::span<std::byte> dst) const {
    {
      std::lock_guard lock(mutex);
      log.push_back({false, i, 1});
    }
    memory_source::read(i, dst);
  }

  mutable std::mutex mutex;
  mutable std::vector<event> log;
};
static_assert(read_ahead_source<advised_source>);

loader_config config_of(sample_order order, std::size_t workers) {
  loader_config c;
  c.batch_size = 64;
  c.order = order;
  c.seed = 5;
  c.workers = workers;
  c.prefetch = 2;
  c.shuffle_window = 2;
  c.part = partition{};
  c.epochs = 1;
  return c;
}

// Runs the loader to its end; returns the records delivered (checking their bytes).
template <class Source>
std::uint64_t drain(const Source& src, const loader_config& c) {
  loader<Source> l(src, c);
  std::uint64_t n = 0;
  while (auto b = l.next()) {
    for (std::size_t k = 0; k < b->size(); ++k)
      REQUIRE(src.matches(b->host_indices()[k], b->record(k)));
    n += b->size();
  }
  return n;
}

}  // namespace

TEST_CASE("block_shuffled advises each unit once, before its records are read") {
  for (std::size_t workers : {1u, 3u}) {
    CAPTURE(workers);
    const std::uint64_t n = 256 * 12 + 100;  // 13 units (the last one short), 7 windows of 2
    advised_source src(n, record_bytes);
    const loader_config c = config_of(sample_order::block_shuffled, workers);
    REQUIRE(drain(src, c) == n);

    std::map<std::uint64_t, int> advised;  // first record of a unit -> times advised
    std::set<std::uint64_t> read_units;
    std::size_t reads = 0;
    for (const auto& e : src.log) {
      if (e.advice) {
        CHECK(e.first % 256 == 0);
        CHECK(e.count == (e.first + 256 <= n ? 256u : n - e.first));
        ++advised[e.first];
      } else {
        ++reads;
        // A read record's unit was advised earlier in the log.
        const std::uint64_t unit = e.first / 256 * 256;
        INFO("record " << e.first);
        CHECK(advised.count(unit) == 1);
        read_units.insert(unit);
      }
    }
    CHECK(reads == n);
    CHECK(read_units.size() == 13);
    CHECK(advised.size() == 13);
    for (const auto& [unit, times] : advised) CHECK(times == 1);

    // Advice runs at most two windows (4 units, 1024 records) ahead of the reads: when a unit is
    // advised, fewer than 4 advised units have no read yet.
    std::set<std::uint64_t> pending;
    for (const auto& e : src.log) {
      if (e.advice) {
        pending.insert(e.first);
        CHECK(pending.size() <= 4);
      } else {
        pending.erase(e.first / 256 * 256);
      }
    }
  }
}

TEST_CASE("a resume mid-epoch advises the window it starts in and the next") {
  const std::uint64_t n = 256 * 12;
  advised_source src(n, record_bytes);
  loader_config c = config_of(sample_order::block_shuffled, 2);
  const sampler order = loader<advised_source>(src, c).batch_sampler();
  src.log.clear();  // that loader's planner ran ahead before it was destroyed
  c.resume = sampler_state{c.seed, 0, 256 * 5 + 64};  // inside window 2 (units 4 and 5)
  drain(src, c);
  std::set<std::uint64_t> advised;
  for (const auto& e : src.log)
    if (e.advice) advised.insert(e.first);
  // Windows 2..5 are entered: 8 units, every unit of the epoch but windows 0 and 1's.
  CHECK(advised.size() == 8);
  std::set<std::uint64_t> skipped;
  for (std::uint64_t w = 0; w < 2; ++w)
    order.for_each_window_unit(0, w, [&](std::uint64_t u) { skipped.insert(order.units().begin(u)); });
  for (std::uint64_t u : skipped) CHECK(advised.count(u) == 0);
}

TEST_CASE("shuffled and sequential orders give no advice") {
  for (sample_order o : {sample_order::shuffled, sample_order::sequential}) {
    advised_source src(256 * 4, record_bytes);
    REQUIRE(drain(src, config_of(o, 2)) == 256 * 4);
    for (const auto& e : src.log) CHECK_FALSE(e.advice);
  }
}

namespace {

// advised_source whose readers decode ahead (decode_ahead_reader): each decode_ahead() call is
// logged as an event with advice == true in a second log, beside the reads.
struct decoding_source : advised_source {
  using advised_source::advised_source;
  struct reader {
    const decoding_source* s;
    void read(std::uint64_t i, std::span<std::byte> dst) { s->read(i, dst); }
    void decode_ahead(std::uint64_t first, std::uint64_t count, const ahead_of_reads&) noexcept {
      std::lock_guard lock(s->mutex);
      s->log.push_back({true, first, count});
      ++s->decoded;
    }
  };
  reader make_reader() const { return reader{this}; }
  // will_need advice is not logged here: the log holds reads and decode-aheads only.
  void will_need(std::uint64_t, std::uint64_t) const noexcept {}
  mutable std::size_t decoded = 0;
};
static_assert(decode_ahead_reader<decoding_source::reader>);

}  // namespace

TEST_CASE("decode ahead: each unit of the next window once, spread over this window's batches") {
  // 13 units of 256 records (the last short), windows of 2 units: 7 windows, 8 batches of 64
  // in each full window. One worker takes tasks in queue order, so the log is deterministic.
  const std::uint64_t n = 256 * 12 + 100;
  decoding_source src(n, record_bytes);
  loader_config c = config_of(sample_order::block_shuffled, 1);
  c.decode_ahead = true;
  const sampler order = loader<decoding_source>(src, c).batch_sampler();
  src.log.clear();
  src.decoded = 0;
  REQUIRE(drain(src, c) == n);

  std::map<std::uint64_t, std::uint64_t> window_of_unit;  // first record of a unit -> window
  for (std::uint64_t w = 0; w < order.windows_per_epoch(); ++w)
    order.for_each_window_unit(0, w, [&](std::uint64_t u) { window_of_unit[order.units().begin(u)] = w; });
  REQUIRE(window_of_unit.size() == 13);

  std::map<std::uint64_t, int> ahead;  // unit -> times decoded ahead
  std::map<std::uint64_t, std::size_t> first_read, last_ahead;  // window -> log position
  std::map<std::uint64_t, std::size_t> first_ahead;
  for (std::size_t k = 0; k < src.log.size(); ++k) {
    const auto& e = src.log[k];
    const std::uint64_t unit = e.first / 256 * 256;
    const std::uint64_t w = window_of_unit.at(unit);
    if (e.advice) {
      CHECK(e.first == unit);
      CHECK(e.count == (unit + 256 <= n ? 256u : n - unit));
      ++ahead[unit];
      first_ahead.try_emplace(w, k);
      last_ahead[w] = k;
    } else {
      first_read.try_emplace(w, k);
    }
  }
  // Every unit but the first window's is decoded ahead exactly once (one epoch: nothing after
  // the last window).
  for (const auto& [unit, w] : window_of_unit) {
    CAPTURE(unit);
    CHECK(ahead.count(unit) == (w == 0 ? 0u : 1u));
    if (ahead.count(unit)) CHECK(ahead[unit] == 1);
  }
  for (std::uint64_t w = 1; w < order.windows_per_epoch(); ++w) {
    CAPTURE(w);
    // Window w is decoded ahead while window w - 1 is read: after w - 1's first read, and
    // before the reads of w's batches (only a batch that starts in w - 1 and ends in w, the
    // short unit making windows unaligned to batches, reads w before its share is queued) ...
    CHECK(first_ahead.at(w) > first_read.at(w - 1));
    std::size_t early_reads = 0;
    for (std::size_t k = first_read.at(w); k < last_ahead.at(w); ++k)
      early_reads += !src.log[k].advice && window_of_unit.at(src.log[k].first / 256 * 256) == w;
    CHECK(early_reads < 64);
    // ... and spread over w - 1's batches: its units (two, for full windows) are decoded ahead
    // at different batches, with reads of w - 1 between them.
    if (w + 1 < order.windows_per_epoch()) {
      std::size_t reads_between = 0;
      for (std::size_t k = first_ahead.at(w); k < last_ahead.at(w); ++k)
        reads_between += !src.log[k].advice;
      CHECK(reads_between >= 64);
    }
  }
}

namespace {

// A source of 256 KiB records (4 to a 1 MiB unit) whose readers take 40 ms per unit decoded
// ahead, and count the units started after the test says the loader is being destroyed.
struct slow_decoding_source : test::memory_source {
  using memory_source::memory_source;
  struct reader {
    const slow_decoding_source* s;
    void read(std::uint64_t i, std::span<std::byte> dst) { s->read(i, dst); }
    void decode_ahead(std::uint64_t, std::uint64_t, const ahead_of_reads&) noexcept {
      s->started.fetch_add(1);
      if (s->stopping.load()) s->started_after_stop.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
    }
  };
  reader make_reader() const { return reader{this}; }
  mutable std::atomic<int> started{0}, started_after_stop{0};
  std::atomic<bool> stopping{false};
};
static_assert(decode_ahead_reader<slow_decoding_source::reader>);

}  // namespace

TEST_CASE("destroying the loader: no unit is decoded ahead once stop is requested") {
  // Windows of 16 units (64 records); each batch of 32 records queues 8 units of the next
  // window behind its own tasks, so with 4 batches planned ahead dozens of units wait.
  slow_decoding_source src(4 * 16 * 8, 256 << 10);
  loader_config c = config_of(sample_order::block_shuffled, 2);
  c.batch_size = 32;
  c.prefetch = 4;
  c.shuffle_window = 16;
  c.decode_ahead = true;
  {
    loader<slow_decoding_source> l(src, c);
    REQUIRE(l.next());
    src.stopping.store(true);  // the destructor below requests stop after this
  }
  CHECK(src.started.load() > 0);  // decode ahead ran
  // Each worker may start one unit between the store above and the destructor's stop request;
  // none after it.
  CHECK(src.started_after_stop.load() <= static_cast<int>(c.workers));
}

namespace {

// A source whose readers decode ahead through the loader's ahead_of_reads guards: it keeps each
// window's guard (the window of a unit: window_of), counts the records read while their window's
// guard still said "ahead" (the loader must mark a window begun before any read of it), and holds
// the first decode ahead of window `hold` until a record of that window has been read, then
// notes what the guard says.
struct guarded_source : test::memory_source {
  using memory_source::memory_source;
  struct reader {
    const guarded_source* s;
    void read(std::uint64_t i, std::span<std::byte> dst) { s->read(i, dst); }
    void decode_ahead(std::uint64_t first, std::uint64_t, const ahead_of_reads& a) noexcept {
      s->decode_ahead(first, a);
    }
  };
  reader make_reader() const { return reader{this}; }

  void read(std::uint64_t i, std::span<std::byte> dst) const {
    {
      std::lock_guard lock(mutex);
      if (const auto w = window_of.find(i / 256); w != window_of.end()) {
        const auto g = guards.find(w->second);
        if (g != guards.end() && g->second()) ++read_while_ahead;
        if (w->second == hold) ++reads_of_held;
      }
    }
    changed.notify_all();
    memory_source::read(i, dst);
  }
  void decode_ahead(std::uint64_t first, const ahead_of_reads& a) const {
    std::unique_lock lock(mutex);
    const auto unit = window_of.find(first / 256);
    if (unit == window_of.end()) return;  // the loader that only says the order's windows
    const std::uint64_t w = unit->second;
    guards.insert_or_assign(w, a);
    ++calls;
    ahead_at_call += a();
    if (w != hold || held) return;
    held = true;
    held_ahead_before = a();
    changed.wait_for(lock, std::chrono::seconds(20), [&] { return reads_of_held > 0; });
    held_ahead_after = a();
  }

  // unit -> its window (epoch 0); empty while the test's first loader runs, which only says the
  // order's windows (a lookup that threw there would end the test in a noexcept decode_ahead)
  std::map<std::uint64_t, std::uint64_t> window_of;
  std::uint64_t hold = 1;
  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  mutable std::map<std::uint64_t, ahead_of_reads> guards;
  mutable int calls = 0, ahead_at_call = 0, read_while_ahead = 0, reads_of_held = 0;
  mutable bool held = false, held_ahead_before = false, held_ahead_after = true;
};
static_assert(decode_ahead_reader<guarded_source::reader>);

}  // namespace

TEST_CASE("a decode ahead that runs late stops once the reads of its window have begun") {
  // 8 units of 256 records, windows of 2: window 1's first unit is decoded ahead by one worker,
  // held until the other worker has read a record of window 1. Then the guard says the reads
  // have begun (decoding the unit now could decode twice a chunk they read whole and let go).
  const std::uint64_t n = 256 * 8;
  guarded_source src(n, record_bytes);
  loader_config c = config_of(sample_order::block_shuffled, 2);
  c.decode_ahead = true;
  const sampler order = loader<guarded_source>(src, c).batch_sampler();
  for (std::uint64_t w = 0; w < order.windows_per_epoch(); ++w)
    order.for_each_window_unit(0, w, [&](std::uint64_t u) { src.window_of[u] = w; });
  {
    std::lock_guard lock(src.mutex);
    src.guards.clear();
    src.calls = src.ahead_at_call = 0;
  }
  REQUIRE(drain(src, c) == n);
  std::lock_guard lock(src.mutex);
  CHECK(src.held);
  CHECK(src.reads_of_held > 0);       // the hold ended by a read, not by its time limit
  CHECK(src.held_ahead_before);       // the unit was started ahead of its reads ...
  CHECK_FALSE(src.held_ahead_after);  // ... and is told to stop once they have begun
  CHECK(src.read_while_ahead == 0);   // no record read while its window's guard said "ahead"
  CHECK(src.calls >= 3);              // windows 1 to 3, one unit or more each
  CHECK(src.ahead_at_call >= 3);      // decoding ahead is not stopped where it is in time
}
