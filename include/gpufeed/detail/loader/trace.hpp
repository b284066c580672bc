// gpufeed::detail — the loader's timeline, exported as Chrome-trace JSON (Perfetto,
// chrome://tracing).
//
// One track per worker, one for the planner, one for the consumer, one per CUDA stream. Each
// track is written by one thread only (the consumer's track by whichever thread calls next(),
// hence its mutex), so recording is a push_back into a pre-reserved vector: no allocation while
// capacity lasts, and events past `capacity` per track are counted and dropped rather than
// growing memory without bound. Off unless loader_config::trace_events is set; the pipeline records
// through a tracer, which does nothing (not even read the clock) when off.
#pragma once

#include <chrono>
#include <memory>
#include <cstdint>
#include <iomanip>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "gpufeed/detail/loader/worker_id.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed::detail::loading {

// Names the calling thread's work in a profiler's timeline while in scope (no probe: nothing).
class probe_range {
 public:
  probe_range(engine_probe* p, const char* name) noexcept : probe_(p) {
    if (probe_) probe_->range_push(name);
  }
  probe_range(const probe_range&) = delete;
  probe_range& operator=(const probe_range&) = delete;
  ~probe_range() {
    if (probe_) probe_->range_pop();
  }

 private:
  engine_probe* probe_;
};

struct trace_event {
  const char* name;        // static string
  std::int64_t start_ns;   // steady_clock nanoseconds
  std::int64_t end_ns;
  std::uint64_t batch;     // sequence number of the batch it concerns
};

class trace_track {
 public:
  trace_track(std::string name, std::size_t capacity) : name_(std::move(name)) {
    events_.reserve(capacity);
  }
  void add(const char* what, std::int64_t start_ns, std::int64_t end_ns, std::uint64_t batch) {
    std::lock_guard lock(mutex_);
    if (events_.size() == events_.capacity()) {
      ++dropped_;
      return;
    }
    events_.push_back(trace_event{what, start_ns, end_ns, batch});
  }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  template <class F>
  void for_each(F&& f) const {
    std::lock_guard lock(mutex_);
    for (const auto& e : events_) f(e);
  }
  [[nodiscard]] std::uint64_t dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
  }

 private:
  std::string name_;
  mutable std::mutex mutex_;  // uncontended but for the consumer track and export
  std::vector<trace_event> events_;
  std::uint64_t dropped_ = 0;
};

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Writes {"traceEvents":[...]} with complete ("X") events in microseconds since `origin_ns`,
// and thread_name metadata so each track is labelled.
inline void write_chrome_trace(std::ostream& os, const std::vector<const trace_track*>& tracks,
                               std::int64_t origin_ns) {
  const auto flags = os.flags();
  const auto precision = os.precision();
  os << std::fixed << std::setprecision(3);
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  auto sep = [&] {
    if (!first) os << ",\n";
    first = false;
  };
  for (std::size_t t = 0; t < tracks.size(); ++t) {
    sep();
    os << R"({"name":"thread_name","ph":"M","pid":1,"tid":)" << t << R"(,"args":{"name":")"
       << tracks[t]->name() << "\"}}";
    sep();
    os << R"({"name":"thread_sort_index","ph":"M","pid":1,"tid":)" << t
       << R"(,"args":{"sort_index":)" << t << "}}";
    tracks[t]->for_each([&](const trace_event& e) {
      sep();
      const double ts = static_cast<double>(e.start_ns - origin_ns) / 1e3;
      const double dur = static_cast<double>(e.end_ns - e.start_ns) / 1e3;
      os << R"({"name":")" << e.name << R"(","ph":"X","pid":1,"tid":)" << t << ",\"ts\":" << ts
         << ",\"dur\":" << dur << R"(,"args":{"batch":)" << e.batch << "}}";
    });
  }
  os << "]}\n";
  os.flags(flags);
  os.precision(precision);
}

// The loader's tracks: one per worker, keyed by its id (worker_id.hpp, never a position, so the
// planner's and consumer's tracks do not move with the worker count), the planner's, the
// consumer's. A thread looks its track up once and records into it. Off (every call a no-op,
// now() returns 0 without reading the clock, every track lookup nullptr) when made with
// capacity 0.
class tracer {
 public:
  // Tracks for workers 0 .. workers - 1, the planner and the consumer.
  tracer(std::size_t workers, std::size_t capacity) : capacity_(capacity) {
    if (!capacity) return;
    for (std::size_t w = 0; w < workers; ++w)
      workers_.emplace(worker_id(w), std::make_unique<trace_track>(
                                         "worker " + std::to_string(w), capacity));
    planner_ = std::make_unique<trace_track>("planner", capacity);
    consumer_ = std::make_unique<trace_track>("consumer", capacity);
  }

  [[nodiscard]] bool on() const noexcept { return capacity_ != 0; }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::int64_t now() const noexcept { return on() ? now_ns() : 0; }

  // Worker w's track; nullptr when off or for an id without one (its events are then not kept).
  [[nodiscard]] trace_track* worker(worker_id w) const noexcept {
    const auto it = workers_.find(w);
    return it == workers_.end() ? nullptr : it->second.get();
  }
  [[nodiscard]] trace_track* planner() const noexcept { return planner_.get(); }
  [[nodiscard]] trace_track* consumer() const noexcept { return consumer_.get(); }

  void add(trace_track* track, const char* what, std::int64_t start_ns, std::int64_t end_ns,
           std::uint64_t batch) {
    if (track) track->add(what, start_ns, end_ns, batch);
  }
  // An event of `ns` nanoseconds ending now.
  void add_ending_now(trace_track* track, const char* what, std::uint64_t ns,
                      std::uint64_t batch) {
    if (!track) return;
    const std::int64_t end = now_ns();
    track->add(what, end - static_cast<std::int64_t>(ns), end, batch);
  }

  [[nodiscard]] std::uint64_t dropped() const {
    std::uint64_t n = 0;
    for (const trace_track* t : tracks()) n += t->dropped();
    return n;
  }
  // These tracks (workers in id order, the planner, the consumer), then `extra` (e.g. the copy
  // streams'), as Chrome-trace JSON.
  void write(std::ostream& os, const std::vector<const trace_track*>& extra,
             std::int64_t origin_ns) const {
    std::vector<const trace_track*> all = tracks();
    all.insert(all.end(), extra.begin(), extra.end());
    write_chrome_trace(os, all, origin_ns);
  }

 private:
  [[nodiscard]] std::vector<const trace_track*> tracks() const {
    std::vector<const trace_track*> all;
    for (const auto& [id, t] : workers_) all.push_back(t.get());
    if (planner_) all.push_back(planner_.get());
    if (consumer_) all.push_back(consumer_.get());
    return all;
  }

  std::size_t capacity_;
  std::map<worker_id, std::unique_ptr<trace_track>> workers_;  // built before any thread
  std::unique_ptr<trace_track> planner_, consumer_;
};

}  // namespace gpufeed::detail::loading
