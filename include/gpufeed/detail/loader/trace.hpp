// gpufeed::detail — the loader's timeline, exported as Chrome-trace JSON (Perfetto,
// chrome://tracing).
//
// One track per worker, one for the planner, one for the consumer, one per CUDA stream. Each
// track is written by one thread only (the consumer's track by whichever thread calls next(),
// hence its mutex), so recording is a push_back into a pre-reserved vector: no allocation while
// capacity lasts, and events past `capacity` per track are counted and dropped rather than
// growing memory without bound. Off unless loader_config::trace is set.
#pragma once

#include <chrono>
#include <cstdint>
#include <iomanip>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace gpufeed::detail {

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

}  // namespace gpufeed::detail
