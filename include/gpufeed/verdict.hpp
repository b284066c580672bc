// gpufeed — which stage bounds a loader's throughput, with the figures that say so.
//
//   auto v = gpufeed::diagnose(feed.stats());
//   std::puts(v.report().c_str());
//
// The reasoning, from the consumer backwards:
//   consumer  the consumer rarely waited for data (stall < 10 %): the GPU step is the bottleneck,
//             which is the good case — the loader keeps up.
//   h2d       the consumer waited, and the copy engine was busy most of the time (copy time per
//             stream close to the elapsed time) while workers had slack — or copies ran >= 90 %
//             of the time, when the link is the ceiling whatever the workers do.
//   storage   the consumer waited, workers were busy, but mostly blocked in I/O: their reads took
//             far more wall time than CPU time (data not in the page cache, slow disk).
//   decode    the consumer waited, workers were busy on the CPU (decompression, parsing): more
//             workers (if cores are free) or uncompressed shards help.
//   pipeline  the consumer waited but no stage is saturated: prefetch depth or batch structure
//             limits overlap (e.g. too few records per batch for the workers).
// Thresholds are stated in the code below; the evidence lists the figures each verdict used.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gpufeed/stats.hpp"

namespace gpufeed {

enum class bottleneck { consumer, h2d, storage, decode, pipeline, unknown };

inline const char* to_string(bottleneck b) noexcept {
  switch (b) {
    case bottleneck::consumer: return "consumer";
    case bottleneck::h2d: return "h2d";
    case bottleneck::storage: return "storage";
    case bottleneck::decode: return "decode";
    case bottleneck::pipeline: return "pipeline";
    case bottleneck::unknown: break;
  }
  return "unknown";
}

struct verdict {
  bottleneck stage = bottleneck::unknown;
  std::string summary;                 // one plain sentence
  std::vector<std::string> evidence;   // the figures behind it
  std::string suggestion;              // what to change

  [[nodiscard]] std::string report() const {
    std::string s = std::string("bottleneck: ") + to_string(stage) + "\n" + summary + "\n";
    for (const auto& e : evidence) s += "  - " + e + "\n";
    if (!suggestion.empty()) s += "suggestion: " + suggestion + "\n";
    return s;
  }
};

namespace detail {
inline std::string fmt(const char* f, double a) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}
inline std::string fmt(const char* f, double a, double b) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}
}  // namespace detail

// cores: CPU cores available to the process (0 = unknown), used to tell whether adding workers
// can help.
inline verdict diagnose(const loader_stats& s, unsigned cores = 0) {
  using detail::fmt;
  verdict v;
  if (s.batches < 2 || s.elapsed_seconds <= 0) {
    v.summary = "too few batches to judge; run the loader longer";
    return v;
  }
  const double elapsed = s.elapsed_seconds;
  const double workers = static_cast<double>(std::max<std::size_t>(1, s.workers.size()));
  const double read = s.read_seconds();
  double read_cpu = 0, runq = 0, idle = 0;
  for (const auto& w : s.workers) {
    read_cpu += w.read_cpu_seconds;
    runq += w.runqueue_seconds;
    idle += w.idle_seconds;
  }
  // Worker utilisation: reading against reading + waiting for work (start-up excluded).
  const double busy = read + idle > 0 ? read / (read + idle) : 0.0;
  // Read time splits into CPU, waiting for a core (oversubscribed machine) and waiting for I/O.
  // The run-queue figure covers the whole thread; nearly all of it falls inside reads, where
  // workers spend their runnable time.
  const double io_share = read > 0 ? std::clamp((read - read_cpu - runq) / read, 0.0, 1.0) : 0;
  const double cpu_share = read > 0 ? read_cpu / read : 0;
  const double runq_share = read > 0 ? std::min(runq / read, 1.0) : 0;
  const double stall = s.stall_fraction();
  const double streams = static_cast<double>(std::max<std::size_t>(1, s.streams));
  const double copy_busy = s.transfer.timed_copies
                               ? s.transfer.copy_seconds *
                                     (static_cast<double>(s.transfer.copies) /
                                      static_cast<double>(s.transfer.timed_copies)) /
                                     elapsed
                               : 0.0;
  v.evidence.push_back(fmt("delivered %.3f GB/s, %.0f records/s", s.gb_per_second(),
                           s.records_per_second()));
  v.evidence.push_back(fmt("consumer waited for data %.1f %% of its time", 100 * stall));
  v.evidence.push_back(fmt("workers busy reading %.1f %% of the time (%.0f workers)", 100 * busy,
                           workers));
  v.evidence.push_back(fmt("read time: %.1f %% on a CPU, %.1f %% waiting for I/O", 100 * cpu_share,
                           100 * io_share));
  if (runq_share > 0.05)
    v.evidence.push_back(fmt("workers waited %.1f %% of their read time for a free core: more "
                             "runnable threads than cores",
                             100 * runq_share));
  if (s.transfer.copies)
    v.evidence.push_back(fmt("copy engine busy %.1f %% of the time over %.0f streams",
                             100 * copy_busy, streams));
  v.evidence.push_back(fmt("ready batches when the consumer asked: %.2f of %.0f", s.ready_queue_mean,
                           static_cast<double>(s.ready_queue_capacity)));

  if (stall < 0.10) {
    v.stage = bottleneck::consumer;
    v.summary = "The consumer (your GPU step) bounds throughput: data was ready when it asked. "
                "This is the good case.";
    v.suggestion = "nothing to fix in loading; speed up the step itself, or use fewer workers to "
                   "free CPU for other work";
    return v;
  }
  // Copies running nearly all the time (>= 90 %) mean the link is the ceiling even when workers
  // are busy too: more workers would only wait for slots (on the H200, 14 busy workers and the
  // copies both saturated at 50 GB/s against a 55 GB/s link, and "raise workers" was wrong).
  const bool link_full = copy_busy >= 0.9;
  if (s.transfer.copies && ((copy_busy > 0.8 && busy < 0.8) || link_full)) {
    v.stage = bottleneck::h2d;
    const double rate = s.transfer.copy_seconds > 0
                            ? static_cast<double>(s.transfer.bytes) / s.transfer.copy_seconds / 1e9
                            : 0.0;
    v.summary = fmt("Host-to-device copies bound throughput: the copy engine ran %.0f %% of the "
                    "time at %.3f GB/s.", 100 * copy_busy, rate);
    if (busy >= 0.8)
      v.summary += fmt(" Workers are busy too (%.0f %%), but more of them cannot push data past "
                       "the link.", 100 * busy);
    v.suggestion = "copy less (decode or crop on the GPU, send uint8 not float), use larger "
                   "batches (copies under 1 MiB are slow), check the PCIe link with gpufeed doctor";
    return v;
  }
  if (busy > 0.75) {
    // Reads from the page cache are memcpy: nearly all CPU. Reads that wait on a device are
    // mostly I/O wait. Time spent waiting for a core counts as neither.
    if (io_share > 0.5) {
      v.stage = bottleneck::storage;
      const double rate = read > 0 ? static_cast<double>(s.bytes) / elapsed / 1e9 : 0.0;
      v.summary = fmt("Storage bounds throughput: workers spend most of each read waiting for "
                      "I/O (%.0f %% of read time); storage delivers %.3f GB/s.",
                      100 * io_share, rate);
      v.suggestion = "the data is probably not in the page cache: put the shards on faster "
                     "storage or in RAM (tmpfs), pack small files into larger shards, or add "
                     "workers to keep more I/O in flight";
    } else {
      v.stage = bottleneck::decode;
      v.summary = fmt("CPU work in the workers bounds throughput (decompression, parsing): "
                      "workers are busy %.0f %% of the time, %.0f %% of it on a CPU.",
                      100 * busy, 100 * cpu_share);
      if (runq_share > 0.25)
        v.suggestion = "the machine has fewer free cores than runnable threads: use fewer "
                       "workers or free cores (other processes compete for them)";
      else if (cores && static_cast<double>(cores) > workers)
        v.suggestion = fmt("raise workers: %.0f run on %.0f cores", workers,
                           static_cast<double>(cores));
      else
        v.suggestion = "every core is already reading: store shards uncompressed or with a "
                       "cheaper filter, or move decoding to the GPU";
    }
    return v;
  }
  v.stage = bottleneck::pipeline;
  v.summary = fmt("The consumer waited %.0f %% of its time although workers were busy only "
                  "%.0f %%: overlap is limited by the pipeline's shape.", 100 * stall, 100 * busy);
  v.suggestion = "raise prefetch depth, use larger batches, or lower chunk_records so more "
                 "workers share each batch";
  return v;
}

}  // namespace gpufeed
