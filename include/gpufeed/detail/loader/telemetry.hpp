// gpufeed::detail — the loader's always-on counters.
//
// Relaxed atomics, updated once per chunk (workers) or per batch (planner, consumer). Each
// worker's counters sit on their own cache line so workers never contend, and are keyed by the
// worker's id (worker_id.hpp), never by position: a worker looks its counters up once, when it
// starts, and loader_stats::workers lists them in id order.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpufeed/detail/loader/worker_id.hpp"
#include "gpufeed/stats.hpp"

namespace gpufeed::detail::loading {

using steady = std::chrono::steady_clock;

// Scheduler statistics of thread `tid` of this process, from /proc/self/task/<tid>/schedstat:
// nanoseconds on a CPU and nanoseconds runnable but waiting for one. Read only when stats are
// taken, never per record: a per-chunk clock_gettime(CLOCK_THREAD_CPUTIME_ID) is a system call
// (2.3 us on the 2-core VM), which would have cost ~7 % of a 16 x 16 KiB chunk. Zeros where
// schedstat is unavailable.
struct thread_sched {
  std::uint64_t on_cpu_ns = 0, waiting_ns = 0;
};
inline thread_sched sched_of(long tid) noexcept {
  thread_sched t;
  if (tid <= 0) return t;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
  std::FILE* f = std::fopen(path, "r");
  if (!f) return t;
  unsigned long long on_cpu = 0, waiting = 0;
  if (std::fscanf(f, "%llu %llu", &on_cpu, &waiting) == 2) {
    t.on_cpu_ns = on_cpu;
    t.waiting_ns = waiting;
  }
  std::fclose(f);
  return t;
}

inline std::uint64_t since_ns(steady::time_point t0) noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - t0).count());
}

struct alignas(64) worker_counters {
  std::atomic<std::uint64_t> records{0}, bytes{0}, chunks{0}, failures{0};
  std::atomic<std::uint64_t> read_ns{0}, idle_ns{0};
  std::atomic<std::uint64_t> transform_ns{0};  // part of read_ns
  std::atomic<long> tid{0};  // OS thread id, for run-queue statistics
};

class telemetry {
 public:
  // Counters for workers 0 .. workers - 1.
  explicit telemetry(std::size_t workers) {
    for (std::size_t w = 0; w < workers; ++w)
      workers_.emplace(worker_id(w), std::make_unique<worker_counters>());
  }

  // Worker w's counters; std::logic_error (a loader bug) for an id this telemetry does not know.
  worker_counters& worker(worker_id w) {
    const auto it = workers_.find(w);
    if (it == workers_.end())
      throw std::logic_error("loader telemetry: no counters for worker " + std::to_string(w.value));
    return *it->second;
  }

  // The consumer's first request: rates are measured from here, not from construction, so the
  // one-off cost of allocating pinned and device slots does not dilute short runs.
  void consumer_started() noexcept {
    if (first_request_ns_.load(std::memory_order_relaxed) != 0) return;
    std::int64_t expected = 0;
    first_request_ns_.compare_exchange_strong(
        expected, std::chrono::duration_cast<std::chrono::nanoseconds>(
                      steady::now().time_since_epoch()).count());
  }

  // Nanoseconds from max(t0, the consumer's first request) to now, 0 before that request. Worker
  // idle time counts only from there: while the consumer has not asked yet, waiting is start-up
  // (it varies with the consumer's own set-up), not the pipeline's shape.
  [[nodiscard]] std::uint64_t since_consumer_start_ns(steady::time_point t0) const noexcept {
    const std::int64_t first = first_request_ns_.load(std::memory_order_relaxed);
    if (!first) return 0;
    const auto start = std::max(t0, steady::time_point(std::chrono::nanoseconds(first)));
    return since_ns(start);
  }

  void delivered(std::uint64_t records, std::uint64_t bytes, std::uint64_t wait_ns,
                 std::size_t ready_now) noexcept {
    batches_.fetch_add(1, std::memory_order_relaxed);
    records_.fetch_add(records, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    wait_ns_.fetch_add(wait_ns, std::memory_order_relaxed);
    ready_sum_.fetch_add(ready_now, std::memory_order_relaxed);
  }
  void held(std::uint64_t ns) noexcept { hold_ns_.fetch_add(ns, std::memory_order_relaxed); }
  void planner_waited(std::uint64_t ns) noexcept {
    planner_wait_ns_.fetch_add(ns, std::memory_order_relaxed);
  }
  void skipped(const skipped_record& r) {
    std::lock_guard lock(log_mutex_);
    (r.substituted ? substituted_ : skipped_) += 1;
    log_.push_back(r);
    if (log_.size() > log_capacity) log_.pop_front();
  }

  // Fills the counters into s (the caller sets the configuration fields).
  void snapshot(loader_stats& s) const {
    constexpr double ns = 1e-9;
    const std::int64_t first = first_request_ns_.load(std::memory_order_relaxed);
    const steady::time_point origin =
        first ? steady::time_point(std::chrono::nanoseconds(first)) : start_;
    s.elapsed_seconds = static_cast<double>(since_ns(origin)) * ns;
    s.batches = batches_.load(std::memory_order_relaxed);
    s.records = records_.load(std::memory_order_relaxed);
    s.bytes = bytes_.load(std::memory_order_relaxed);
    s.consumer_wait_seconds = static_cast<double>(wait_ns_.load(std::memory_order_relaxed)) * ns;
    s.consumer_hold_seconds = static_cast<double>(hold_ns_.load(std::memory_order_relaxed)) * ns;
    s.planner_wait_seconds =
        static_cast<double>(planner_wait_ns_.load(std::memory_order_relaxed)) * ns;
    s.ready_queue_mean = s.batches ? static_cast<double>(ready_sum_.load()) /
                                         static_cast<double>(s.batches)
                                   : 0.0;
    s.workers.clear();
    for (const auto& [id, counters] : workers_) {
      const worker_counters& w = *counters;
      worker_stats ws;
      ws.records = w.records.load(std::memory_order_relaxed);
      ws.bytes = w.bytes.load(std::memory_order_relaxed);
      ws.chunks = w.chunks.load(std::memory_order_relaxed);
      ws.failures = w.failures.load(std::memory_order_relaxed);
      ws.read_seconds = static_cast<double>(w.read_ns.load(std::memory_order_relaxed)) * ns;
      ws.transform_seconds =
          static_cast<double>(w.transform_ns.load(std::memory_order_relaxed)) * ns;
      const thread_sched sched = sched_of(w.tid.load());
      ws.read_cpu_seconds = static_cast<double>(sched.on_cpu_ns) * ns;
      ws.runqueue_seconds = static_cast<double>(sched.waiting_ns) * ns;
      ws.idle_seconds = static_cast<double>(w.idle_ns.load(std::memory_order_relaxed)) * ns;
      s.workers.push_back(ws);
    }
    std::lock_guard lock(log_mutex_);
    s.skipped = skipped_;
    s.substituted = substituted_;
    s.skipped_log.assign(log_.begin(), log_.end());
  }

  [[nodiscard]] steady::time_point start() const noexcept { return start_; }

 private:
  static constexpr std::size_t log_capacity = 1000;
  steady::time_point start_ = steady::now();
  std::atomic<std::int64_t> first_request_ns_{0};
  std::map<worker_id, std::unique_ptr<worker_counters>> workers_;  // built before any thread
  std::atomic<std::uint64_t> batches_{0}, records_{0}, bytes_{0}, wait_ns_{0}, hold_ns_{0};
  std::atomic<std::uint64_t> planner_wait_ns_{0}, ready_sum_{0};
  mutable std::mutex log_mutex_;
  std::deque<skipped_record> log_;
  std::uint64_t skipped_ = 0, substituted_ = 0;
};

}  // namespace gpufeed::detail::loading
