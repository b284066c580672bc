// gpufeed-bench: what every case shares — run parameters, the consumer ("model"), the timed
// loop's clock, and one result per case (JSON object and table row).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_gpu.hpp"

namespace bench {

using clock_type = std::chrono::steady_clock;

// Where values computed only to touch memory go, so the compiler cannot drop the reads.
inline std::atomic<std::uint64_t> sink{0};
inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Settings every timed case uses.
struct params {
  std::size_t batch_bytes = std::size_t{8} << 20;  // records per batch = batch_bytes / record
  double case_seconds = 1.5;        // timed part of each case (after the warm-up)
  std::uint64_t warmup_batches = 3;  // untimed, at the start of every case
  std::uint64_t min_batches = 3;    // timed batches at least, whatever the time
  std::uint64_t seed = 42;
  gpu* device = nullptr;            // nullptr: host target
  [[nodiscard]] std::string target() const { return device ? "cuda" : "host"; }
  [[nodiscard]] std::size_t batch_records(std::size_t record_bytes, std::uint64_t n) const {
    const std::size_t by_bytes = std::max<std::size_t>(1, batch_bytes / record_bytes);
    return static_cast<std::size_t>(std::min<std::uint64_t>(by_bytes, std::max<std::uint64_t>(1, n / 4)));
  }
};

// The consumer of every loader: the synthetic model kernel on the consumer's stream (device
// target), or, on the host target, a 64-bit checksum of the batch on the calling thread followed
// by a wait until compute_ms have passed since the call began (a sleep, standing for a device
// that computes while the CPU is free).
class model {
 public:
  explicit model(gpu* g) : gpu_(g) {}
  model(const model&) = delete;
  model& operator=(const model&) = delete;
  ~model() {
    if (gpu_ && tracing_) gpu_->trace_models(0);
  }

  void run(const std::byte* data, std::size_t bytes, double compute_ms,
           gpufeed::stream_handle s) {
    const auto t0 = clock_type::now();
    if (tracing_ && launches_.size() < launches_.capacity()) launches_.push_back(ns(t0));
    if (gpu_) {
      gpu_->model(data, bytes, compute_ms, s);
      return;
    }
    run_host(data, bytes, compute_ms, t0);
    if (tracing_ && spans_.size() < spans_.capacity()) spans_.emplace_back(ns(t0), ns(clock_type::now()));
  }
  // Waits until everything queued on `s` is done (device target); nothing on the host.
  void finish(gpufeed::stream_handle s) {
    if (gpu_) gpu_->synchronize(s);
  }
  [[nodiscard]] std::uint64_t checksum() const noexcept { return checksum_; }

  // Records, for the next `capacity` runs, when run() was called and when the model ran
  // (steady_clock ns; on the device, from CUDA events around the kernel).
  void trace(std::size_t capacity) {
    tracing_ = true;
    launches_.reserve(capacity);
    spans_.reserve(capacity);
    if (gpu_) gpu_->trace_models(capacity);
  }
  [[nodiscard]] const std::vector<std::int64_t>& launches() const noexcept { return launches_; }
  [[nodiscard]] std::vector<std::pair<std::int64_t, std::int64_t>> spans() const {
    return gpu_ ? gpu_->model_spans() : spans_;
  }

 private:
  static std::int64_t ns(clock_type::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  void run_host(const std::byte* data, std::size_t bytes, double compute_ms,
                clock_type::time_point t0) {
    std::uint64_t sum = 0;
    std::size_t k = 0;
    for (; k + 8 <= bytes; k += 8) {
      std::uint64_t w;
      std::memcpy(&w, data + k, 8);
      sum += w;
    }
    for (; k < bytes; ++k) sum += static_cast<unsigned char>(data[k]);
    checksum_ += sum;
    if (compute_ms <= 0) return;
    // Sleep (the CPU is free for the workers) to within 100 us of the end, whose timer slack
    // would otherwise lengthen every step, then yield until the end.
    const auto end = t0 + std::chrono::nanoseconds(static_cast<std::int64_t>(compute_ms * 1e6));
    std::this_thread::sleep_until(end - std::chrono::microseconds(100));
    while (clock_type::now() < end) std::this_thread::yield();
  }

  gpu* gpu_;
  std::uint64_t checksum_ = 0;
  bool tracing_ = false;
  std::vector<std::int64_t> launches_;
  std::vector<std::pair<std::int64_t, std::int64_t>> spans_;
};

// One case's figures. `extra` holds the fields only some cases have (overlap, limits, ...).
struct result {
  std::string case_name, loader, target, dataset, format, order;
  std::size_t record_bytes = 0, workers = 0, prefetch = 0, streams = 0, batch_size = 0;
  std::uint64_t batches = 0, records = 0, bytes = 0;
  double seconds = 0, stall_fraction = 0;
  std::size_t pinned_bytes = 0;
  std::string note;  // printed in the table
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();

  [[nodiscard]] double records_per_s() const {
    return seconds > 0 ? static_cast<double>(records) / seconds : 0.0;
  }
  [[nodiscard]] double gb_per_s() const {
    return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
  }
  [[nodiscard]] double ms_per_batch() const {
    return batches ? seconds * 1e3 / static_cast<double>(batches) : 0.0;
  }
  [[nodiscard]] nlohmann::ordered_json to_json() const {
    nlohmann::ordered_json j;
    j["case"] = case_name;
    j["loader"] = loader;
    j["target"] = target;
    j["dataset"] = dataset;
    j["format"] = format;
    j["order"] = order;
    j["record_bytes"] = record_bytes;
    j["workers"] = workers;
    j["prefetch"] = prefetch;
    j["streams"] = streams;
    j["batch_size"] = batch_size;
    j["batches"] = batches;
    j["records"] = records;
    j["bytes"] = bytes;
    j["seconds"] = seconds;
    j["records_per_s"] = records_per_s();
    j["gb_per_s"] = gb_per_s();
    j["stall_fraction"] = stall_fraction;
    j["pinned_bytes"] = pinned_bytes;
    for (const auto& [k, v] : extra.items()) j[k] = v;
    return j;
  }
};

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Runs `once` `n` times (n >= 1) and returns the median run by GB/s (the lower middle one for an
// even n) with every run's figure beside it: `repeats`, `repeat_gb_per_s` (in run order),
// `median_gb_per_s`, `min_gb_per_s`, `max_gb_per_s` and `median_records_per_s`, and the same in
// the table's note. A single run's figure has no spread; these do.
template <class Once>
result repeated(std::size_t n, Once once) {
  std::vector<result> runs;
  for (std::size_t k = 0; k < std::max<std::size_t>(1, n); ++k) runs.push_back(once());
  std::vector<double> gb, rps;
  for (const auto& r : runs) gb.push_back(r.gb_per_s()), rps.push_back(r.records_per_s());
  std::vector<std::size_t> by(runs.size());
  for (std::size_t k = 0; k < by.size(); ++k) by[k] = k;
  std::sort(by.begin(), by.end(), [&](std::size_t a, std::size_t b) { return gb[a] < gb[b]; });
  auto median = [&](const std::vector<double>& v) {
    const std::size_t m = by.size();
    return m % 2 ? v[by[m / 2]] : 0.5 * (v[by[m / 2 - 1]] + v[by[m / 2]]);
  };
  result r = runs[by[(by.size() - 1) / 2]];
  r.extra["repeats"] = runs.size();
  r.extra["repeat_gb_per_s"] = gb;
  r.extra["median_gb_per_s"] = median(gb);
  r.extra["min_gb_per_s"] = gb[by.front()];
  r.extra["max_gb_per_s"] = gb[by.back()];
  r.extra["median_records_per_s"] = median(rps);
  const std::string spread = "median of " + std::to_string(runs.size()) + " " +
                             fmt("%.3f", median(gb)) + " GB/s [" + fmt("%.3f", gb[by.front()]) +
                             "-" + fmt("%.3f", gb[by.back()]) + "]";
  r.note = r.note.empty() ? spread : spread + ", " + r.note;
  return r;
}

// The figure a summary quotes: the median for a repeated case, else the single run's.
inline double quoted_gb_per_s(const result& r) {
  return r.extra.value("median_gb_per_s", r.gb_per_s());
}
inline std::string quoted_range(const result& r) {
  if (!r.extra.contains("repeats")) return "1 run";
  return fmt("%.2f", r.extra.value("min_gb_per_s", 0.0)) + "-" +
         fmt("%.2f", r.extra.value("max_gb_per_s", 0.0)) + " (" +
         std::to_string(r.extra.value("repeats", 0)) + " runs)";
}

// Compact table: one row per case, in run order.
inline void print_table(std::FILE* o, const std::vector<result>& rs) {
  std::fprintf(o, "\n%-46s %10s %8s %6s %6s %9s  %s\n", "case", "records/s", "GB/s", "stall",
               "pin MiB", "ms/batch", "note");
  for (const auto& r : rs)
    std::fprintf(o, "%-46s %10.0f %8.3f %6.2f %6.0f %9.3f  %s\n", r.case_name.c_str(),
                 r.records_per_s(), r.gb_per_s(), r.stall_fraction,
                 static_cast<double>(r.pinned_bytes) / double(1u << 20), r.ms_per_batch(),
                 r.note.c_str());
}

}  // namespace bench
