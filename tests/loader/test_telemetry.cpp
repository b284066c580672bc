// Telemetry: planted bottlenecks on the host target must be named correctly by diagnose(), and
// the Chrome trace must parse and carry the expected tracks.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "gpufeed/loader.hpp"
#include "gpufeed/verdict.hpp"
#include "memory_source.hpp"
#include "mock_engine.hpp"

using namespace gpufeed;
using namespace std::chrono_literals;

namespace {

// Record reads that wait (storage) or compute (decode) for a set time.
struct timed_source : test::memory_source {
  enum class kind { wait, compute } how = kind::wait;
  std::chrono::microseconds per_record{0};
  using test::memory_source::memory_source;
  void read(std::uint64_t i, std::span<std::byte> dst) const {
    if (how == kind::wait) {
      std::this_thread::sleep_for(per_record);
    } else {
      const auto end = std::chrono::steady_clock::now() + per_record;
      volatile std::uint64_t x = 0;
      while (std::chrono::steady_clock::now() < end) x = x + 1;
    }
    test::memory_source::read(i, dst);
  }
};

loader_config config(std::size_t workers) {
  loader_config c;
  c.batch_size = 16;
  c.part = partition{};
  c.workers = workers;
  c.prefetch = 4;
  return c;
}

template <class L>
void consume(L& l, int batches, std::chrono::microseconds per_batch) {
  for (int k = 0; k < batches; ++k) {
    auto b = l.next();
    REQUIRE(b);
    if (per_batch.count()) std::this_thread::sleep_for(per_batch);
  }
}

}  // namespace

TEST_CASE("slow storage: workers busy waiting on I/O -> storage") {
  timed_source src(100000, 1024);
  src.how = timed_source::kind::wait;
  // Long against scheduling delays: on a loaded machine (2 cores, load 10, TSan) a wakeup waits
  // ~4 ms for a core, which is 65 % of a 2 ms read (the verdict then rightly says cores are
  // short) but under 20 % of this one.
  src.per_record = 20ms;
  loader<timed_source> l(src, config(2));
  consume(l, 6, 0us);
  const auto v = diagnose(l.stats(), 8);
  MESSAGE(v.report());
  CHECK(v.stage == bottleneck::storage);
  CHECK(v.suggestion.find("page cache") != std::string::npos);
}

TEST_CASE("expensive decode with too few workers -> decode, raise workers") {
  timed_source src(100000, 1024);
  src.how = timed_source::kind::compute;
  src.per_record = 1ms;  // long against scheduling delays on a loaded machine
  loader<timed_source> l(src, config(1));
  consume(l, 10, 0us);
  const auto v = diagnose(l.stats(), 8);
  MESSAGE(v.report());
  CHECK(v.stage == bottleneck::decode);
  // "raise workers" where cores are free; on a loaded machine, that cores are short.
  CHECK(v.suggestion.find("workers") != std::string::npos);
}

TEST_CASE("slow consumer -> consumer (the good case)") {
  test::memory_source src(100000, 1024);
  loader<test::memory_source> l(src, config(2));
  consume(l, 25, 10ms);
  const auto v = diagnose(l.stats(), 8);
  MESSAGE(v.report());
  CHECK(v.stage == bottleneck::consumer);
  CHECK(l.stats().stall_fraction() < 0.1);
}

TEST_CASE("slow copies with idle workers -> h2d") {
  test::memory_source src(100000, 1024);
  loader_config c = config(2);
  c.target = test::mock_target(5ms);
  loader<test::memory_source> l(src, c);
  consume(l, 30, 0us);
  const auto s = l.stats();
  const auto v = diagnose(s, 8);
  MESSAGE(v.report());
  CHECK(v.stage == bottleneck::h2d);
  CHECK(s.transfer.copies >= 30);
}

TEST_CASE("copies saturate the link while workers are busy too -> h2d, not decode") {
  // The figures of an H200 run: 14 workers reading from the page cache 93 % of the time, copies
  // on the PCIe link 99 % of it. More workers cannot help; the verdict must say h2d.
  loader_stats s;
  s.elapsed_seconds = 1.0;
  s.batches = 6000;
  s.records = 3'000'000;
  s.bytes = 50'000'000'000;
  s.streams = 2;
  s.ready_queue_capacity = 8;
  for (int k = 0; k < 14; ++k) {
    worker_stats w;
    w.read_seconds = 0.93;
    w.read_cpu_seconds = 0.93;
    w.idle_seconds = 0.07;
    s.workers.push_back(w);
  }
  s.transfer.copies = 6000;
  s.transfer.timed_copies = 6000;
  s.transfer.bytes = s.bytes;
  s.transfer.copy_seconds = 0.99;
  s.transfer.timed_batches = 700;
  s.transfer.consumer_wait_seconds = 0.8;
  s.transfer.consumer_busy_seconds = 0.2;
  const auto v = diagnose(s, 16);
  MESSAGE(v.report());
  CHECK(v.stage == bottleneck::h2d);
  CHECK(v.summary.find("Workers are busy too") != std::string::npos);

  // The same workers with copies busy only half the time: the workers are the limit.
  s.transfer.copy_seconds = 0.5;
  const auto d = diagnose(s, 16);
  CHECK(d.stage == bottleneck::decode);
  CHECK(d.suggestion.find("raise workers") != std::string::npos);
}

TEST_CASE("too few batches to judge") {
  test::memory_source src(100, 8);
  loader<test::memory_source> l(src, config(1));
  const auto v = diagnose(l.stats());
  CHECK(v.stage == bottleneck::unknown);
}

TEST_CASE("the Chrome trace parses and has a track per worker, planner, consumer and stream") {
  test::memory_source src(2000, 512);
  loader_config c = config(3);
  c.trace_events = 100000;
  c.streams = 2;
  c.target = test::mock_target(100us);
  c.epochs = 1;
  const auto started = std::chrono::steady_clock::now();
  loader<test::memory_source> l(src, c);
  std::size_t batches = 0;
  while (auto b = l.next()) ++batches;
  std::ostringstream os;
  l.write_trace(os);
  const double lifetime_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count();
  const auto j = nlohmann::json::parse(os.str());
  REQUIRE(j.contains("traceEvents"));
  std::map<int, std::string> names;
  std::map<std::string, std::size_t> counts;
  double last_end = 0;
  std::vector<std::pair<double, double>> consumer;  // the consumer's events: [ts, ts + dur)
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name")
      names[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
    if (e["ph"] == "X") {
      const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
      // Inside the loader's life (timestamps count from its construction, in microseconds).
      CHECK(ts >= 0);
      CHECK(dur >= 0);
      CHECK(ts + dur <= lifetime_us + 1);
      last_end = std::max(last_end, ts + dur);
      const std::string track = names.at(e["tid"].get<int>());
      counts[track + "/" + e["name"].get<std::string>()] += 1;
      if (track == "consumer") consumer.emplace_back(ts, ts + dur);
    }
  }
  // One thread's waits and holds follow each other: they never overlap (1 us of rounding).
  std::sort(consumer.begin(), consumer.end());
  std::size_t overlaps = 0;
  for (std::size_t k = 1; k < consumer.size(); ++k)
    overlaps += consumer[k].first + 1 < consumer[k - 1].second;
  CHECK(consumer.size() == 2 * batches);
  CHECK(overlaps == 0);
  std::set<std::string> tracks;
  for (auto& [tid, name] : names) tracks.insert(name);
  CHECK(tracks == std::set<std::string>{"worker 0", "worker 1", "worker 2", "planner", "consumer",
                                        "stream 0 (H2D)", "stream 1 (H2D)"});
  CHECK(counts["consumer/wait for batch"] == batches);
  CHECK(counts["consumer/consume"] == batches);
  CHECK(counts["planner/plan"] >= batches);
  // Copies still running when the trace is written are not in it (at most prefetch + held).
  const std::size_t copies = counts["stream 0 (H2D)/H2D copy"] + counts["stream 1 (H2D)/H2D copy"];
  CHECK(copies <= batches);
  CHECK(copies + 6 >= batches);
  CHECK(counts["stream 0 (H2D)/H2D copy"] > 0);
  CHECK(counts["stream 1 (H2D)/H2D copy"] > 0);
  std::size_t reads = 0;
  for (int w = 0; w < 3; ++w) reads += counts["worker " + std::to_string(w) + "/read"];
  std::uint64_t chunks = 0;
  for (const auto& w : l.stats().workers) chunks += w.chunks;
  CHECK(reads == chunks);
  CHECK(last_end > 0);
  CHECK(l.stats().trace_events_dropped == 0);
}

TEST_CASE("without trace_events the timeline is empty but valid") {
  test::memory_source src(100, 8);
  loader<test::memory_source> l(src, config(1));
  (void)l.next();
  std::ostringstream os;
  l.write_trace(os);
  const auto j = nlohmann::json::parse(os.str());
  CHECK(j["traceEvents"].empty());
}
