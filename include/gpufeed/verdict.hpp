// gpufeed — which stage bounds a loader's throughput, with the figures that say so.
//
//   auto v = gpufeed::diagnose(feed.stats());
//   std::puts(v.report().c_str());
//
// The reasoning, from the consumer backwards:
//   consumer  the consumer rarely waited for data (stall < 10 %) and the workers had slack: the
//             GPU step is the bottleneck, which is the good case — the loader keeps up. With
//             saturated workers the loader only just keeps up: their stage is named instead.
//   h2d       the consumer waited, and the copy engine was busy most of the time (copy time per
//             stream close to the elapsed time) while workers had slack — or copies ran >= 90 %
//             of the time, when the link is the ceiling whatever the workers do.
//   remote    the consumer waited, workers were busy, and most of their read time was spent
//             waiting on HTTP requests of shards named by URLs (loader_stats::remote).
//   storage   the consumer waited, workers were busy, but mostly blocked in I/O: their reads took
//             far more wall time than CPU time (data not in the page cache, slow disk). In full
//             random order with small records this is random reads: the locality-aware order
//             (sample_order::block_shuffled) reads whole units with read-ahead.
//   decode    the consumer waited, workers were busy on the CPU (decompression, parsing, memcpy
//             from the page cache): more workers (if cores are free) or uncompressed shards help.
//             When the source reports decode_stats and each record inflated many rows of chunk
//             data (amplification), the cure is the locality-aware order or a repack instead.
//   read      as decode, but the source's decode_stats say no chunk was decompressed (uncompressed
//             data): the workers' CPU time is copying records, so decode advice does not apply.
//             When small records move at under 1 GB/s per worker, each record's fixed cost
//             (the call, bookkeeping, a small copy) is named with its time per record.
//   pipeline  the consumer waited but no stage is saturated: prefetch depth or batch structure
//             limits overlap (e.g. too few records per batch for the workers).
// Workers count as saturated when busy >= 85 % of the time, or >= 60 % while the planner was
// blocked waiting for slots >= 50 % of the run (the slots held batches workers had not
// finished). One threshold (75 % busy) used to split decode from pipeline, and the busy figure
// counted the workers' wait while the consumer started up (which varies from run to run), so
// runs of the same uncompressed data landed on either side; now idle time counts only from the
// consumer's first request, and inside the 60-85 % band a second, independent figure decides.
// Percentages of the workers' time are shares of max(read time, CPU + run-queue time): the
// scheduler's figures cover the whole thread (hand-off work between reads too), so they are
// never shown above 100 % or beside a contradicting share. Copy time is summed over streams and
// each copy's timing includes waiting for the copy engine behind another stream's copy, so the
// sum can pass the wall time: it is reported as such, and read as "busy all the time" (capped).
// Thresholds are stated in the code below; the evidence lists the figures each verdict used.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gpufeed/detail/verdict/explain.hpp"
#include "gpufeed/detail/verdict/remote.hpp"
#include "gpufeed/stats.hpp"

namespace gpufeed {

enum class bottleneck { consumer, h2d, storage, decode, read, pipeline, gpu_decode, remote, unknown };

inline const char* to_string(bottleneck b) noexcept {
  switch (b) {
    case bottleneck::consumer: return "consumer";
    case bottleneck::h2d: return "h2d";
    case bottleneck::storage: return "storage";
    case bottleneck::decode: return "decode";
    case bottleneck::read: return "read";
    case bottleneck::pipeline: return "pipeline";
    case bottleneck::gpu_decode: return "gpu_decode";
    case bottleneck::remote: return "remote";
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
  // Worker utilisation: reading against reading + waiting for work (from the consumer's first
  // request on).
  const double busy = read + idle > 0 ? read / (read + idle) : 0.0;
  // The workers' active time splits into CPU, waiting for a core (oversubscribed machine) and
  // waiting for I/O. The scheduler's figures cover the whole thread, so they are taken against
  // max(read, CPU + run queue): the three shares add up to 100 %.
  const double active = std::max(read, read_cpu + runq);
  const double cpu_share = active > 0 ? read_cpu / active : 0;
  const double runq_share = active > 0 ? runq / active : 0;
  const double io_share = active > 0 ? std::max(0.0, read - read_cpu - runq) / active : 0;
  const double stall = s.stall_fraction();
  const double streams = static_cast<double>(std::max<std::size_t>(1, s.streams));
  const double copy_sum = s.transfer.timed_copies
                              ? s.transfer.copy_seconds *
                                    (static_cast<double>(s.transfer.copies) /
                                     static_cast<double>(s.transfer.timed_copies)) /
                                    elapsed
                              : 0.0;
  // Copy time summed over streams can pass the wall time (see the top): busy at most 100 %.
  const double copy_busy = std::min(copy_sum, 1.0);
  const double planner_blocked = std::min(s.planner_wait_seconds / elapsed, 1.0);
  v.evidence.push_back(fmt("delivered %.3f GB/s, %.0f records/s", s.gb_per_second(),
                           s.records_per_second()));
  v.evidence.push_back(fmt("consumer waited for data %.1f %% of its time", 100 * stall));
  v.evidence.push_back(fmt("workers busy reading %.1f %% of the time (", 100 * busy) +
                       detail::count_of(workers, "worker") + ")");
  v.evidence.push_back(fmt("worker time: %.1f %% on a CPU, ", 100 * cpu_share) +
                       fmt("%.1f %% waiting for a free core, ", 100 * runq_share) +
                       fmt("%.1f %% waiting for I/O", 100 * io_share));
  if (runq_share > 0.05)
    v.evidence.push_back(std::string(workers > 1 ? "workers" : "the worker") +
                         " waited for a free core: more runnable threads than cores");
  v.evidence.push_back(fmt("planner blocked waiting for a free slot %.1f %% of the time",
                           100 * planner_blocked));
  if (s.transfer.copies) {
    if (copy_sum > 1.0)
      v.evidence.push_back(std::string("copy engine busy all the time: copy time summed over ") +
                           detail::count_of(streams, "stream") +
                           fmt(" is %.0f %% of wall time (copies queued behind another stream's "
                               "copy are timed while they wait)",
                               100 * copy_sum));
    else
      v.evidence.push_back(fmt("copy engine busy %.1f %% of the time over ", 100 * copy_busy) +
                           detail::count_of(streams, "stream"));
  }
  v.evidence.push_back(fmt("ready batches when the consumer asked: %.2f of %.0f", s.ready_queue_mean,
                           static_cast<double>(s.ready_queue_capacity)));
  if (s.decode && s.decode->chunks_decoded)
    v.evidence.push_back(
        fmt("decoded %.0f chunks: ", static_cast<double>(s.decode->chunks_decoded)) +
        fmt("%.3f GB for %.3f GB of records ", static_cast<double>(s.decode->decoded_bytes) / 1e9,
            static_cast<double>(s.decode->delivered_bytes) / 1e9) +
        fmt("(%.1f x); cache peak %.0f MiB", s.decode->amplification(),
            static_cast<double>(s.decode->cache_peak_bytes) / 1048576.0) +
        fmt(" of a %.0f MiB budget", static_cast<double>(s.decode->cache_budget_bytes) / 1048576.0));

  // Decoding on the device: what crossed the link for what it delivered, and how busy the
  // device's decode stream was (its kernels timed on a sample of batches).
  const device_decode_stats& dd = s.device_decode;
  double gpu_busy = 0;
  if (dd.on) {
    const double gathered = static_cast<double>(dd.device.gathered_bytes);
    const double moved = static_cast<double>(dd.device.compressed_bytes + dd.device.host_bytes);
    v.evidence.push_back(
        fmt("decoded on the GPU: %.0f units; ", static_cast<double>(dd.device.units)) +
        fmt("%.3f GB over the link for %.3f GB gathered there", moved / 1e9, gathered / 1e9) +
        (gathered > 0 ? fmt(" (%.2f x the records' bytes)", moved / gathered) : std::string()) +
        fmt("; %.0f batches read again on the host", static_cast<double>(dd.batches_redone)));
    if (dd.device.timed_batches && dd.device.batches)
      gpu_busy = std::min(1.0, dd.device.decode_seconds /
                                   static_cast<double>(dd.device.timed_batches) *
                                   static_cast<double>(dd.device.batches) / elapsed);
    if (dd.device.timed_batches)
      v.evidence.push_back(fmt("GPU decode and gather busy %.1f %% of the time", 100 * gpu_busy));
  }

  if (s.remote) v.evidence.push_back(detail::remote_evidence(s));
  const double per_record = detail::worker_seconds_per_record(s);
  if (per_record > 0)
    v.evidence.push_back(fmt("worker time per record: %.2f us (%.0f records/s per worker)",
                             per_record * 1e6, 1.0 / per_record));
  const bool saturated = busy >= 0.85 || (busy >= 0.6 && planner_blocked >= 0.5);

  // Saturated workers with a consumer that rarely waited only just keep up: a faster step would
  // wait for them, so the verdict names the workers' stage (below), not the consumer.
  if (stall < 0.10 && !saturated) {
    v.stage = bottleneck::consumer;
    v.summary = "The consumer (your GPU step) bounds throughput: data was ready when it asked. "
                "This is the good case.";
    v.suggestion = workers > 1 ? "nothing to fix in loading; speed up the step itself, or use "
                                 "fewer workers to free CPU for other work"
                               : "nothing to fix in loading; speed up the step itself";
    return v;
  }
  // Copies running nearly all the time (>= 90 %) mean the link is the ceiling even when workers
  // are busy too: more workers would only wait for slots (with busy workers and copies both
  // saturated just below the link's rate, "raise workers" was wrong).
  const bool link_full = copy_busy >= 0.9;
  if (s.transfer.copies && ((copy_busy > 0.8 && busy < 0.8) || link_full)) {
    v.stage = bottleneck::h2d;
    const double rate = s.transfer.copy_seconds > 0
                            ? static_cast<double>(s.transfer.bytes) / s.transfer.copy_seconds / 1e9
                            : 0.0;
    v.summary = copy_sum > 1.0
                    ? fmt("Host-to-device copies bound throughput: the copy engine was busy all "
                          "the time, at %.3f GB/s per copy.", rate)
                    : fmt("Host-to-device copies bound throughput: the copy engine ran %.0f %% of "
                          "the time at %.3f GB/s.", 100 * copy_busy, rate);
    if (busy >= 0.8)
      v.summary += fmt(" Workers are busy too (%.0f %%), but more of them cannot push data past "
                       "the link.", 100 * busy);
    v.suggestion = "copy less (decode or crop on the GPU, send uint8 not float), use larger "
                   "batches (copies under 1 MiB are slow), check the PCIe link with gpufeed doctor";
    return v;
  }
  if (dd.on && gpu_busy >= 0.85) {
    v.stage = bottleneck::gpu_decode;
    v.summary = fmt("Decoding on the GPU bounds throughput: its decode and gather kernels ran "
                    "%.0f %% of the time.", 100 * gpu_busy);
    v.suggestion = "pack with a codec the GPU decodes faster (bitshuffle-lz4, or LZ4 in 64 KiB "
                   "blocks: each block is decoded by its own warp), or decode part on the host "
                   "(loader_config::decode = host for comparison)";
    return v;
  }
  if (saturated && dd.on && io_share <= 0.5) {
    v.stage = bottleneck::read;
    v.summary = fmt(workers > 1 ? "Reading compressed bytes for the GPU bounds throughput: "
                                  "workers are busy %.0f %% of the time, %.0f %% of it on a CPU."
                                : "Reading compressed bytes for the GPU bounds throughput: the "
                                  "worker is busy %.0f %% of the time, %.0f %% of it on a CPU.",
                    100 * busy, 100 * cpu_share);
    v.suggestion = cores && static_cast<double>(cores) > workers
                       ? "raise workers: " + detail::count_of(workers, "worker") + " run on " +
                             detail::count_of(static_cast<double>(cores), "core")
                       : "use larger batches or records (the workers' cost is per record)";
    return v;
  }
  if (saturated) {
    // Advice for CPU-bound workers: cores first (a short machine, or free cores for more
    // workers), else `otherwise`.
    const char* copying_advice =
        "every core is already busy copying records (nothing was decompressed): deliver fewer "
        "bytes (uint8 rather than float, smaller records) or use a machine with more free cores";
    const auto core_advice = [&](const std::string& otherwise) -> std::string {
      if (runq_share > 0.25)
        return workers > 1 ? "the machine has fewer free cores than runnable threads: use fewer "
                             "workers or free cores (other processes compete for them)"
                           : "the worker waits for a core: free cores (other processes compete "
                             "for them) before adding workers";
      if (cores && static_cast<double>(cores) > workers)
        return "raise workers: " + detail::count_of(workers, "worker") + " run on " +
               detail::count_of(static_cast<double>(cores), "core");
      return otherwise;
    };
    // A fixed cost per small record that bounds the workers: named, with what amortises it
    // first (more workers only multiply the cost).
    const auto explain_per_record = [&] {
      const detail::explanation e = detail::explain_per_record(s);
      if (e.sentence.empty()) return;
      v.summary += e.sentence;
      v.suggestion = e.suggestion + "; " + v.suggestion;
    };
    // Reads from the page cache are memcpy: nearly all CPU. Reads that wait on a device are
    // mostly I/O wait. Time spent waiting for a core counts as neither.
    if (const detail::explanation remote_io = detail::explain_remote(s, workers, runq);
        !remote_io.sentence.empty()) {
      v.stage = bottleneck::remote;
      v.summary = remote_io.sentence;
      v.suggestion = remote_io.suggestion;
    } else if (io_share > 0.5) {
      v.stage = bottleneck::storage;
      const double rate = static_cast<double>(s.bytes) / elapsed / 1e9;
      v.summary = fmt("Storage bounds throughput: workers spend most of each read waiting for "
                      "I/O (%.0f %% of their time); storage delivers %.3f GB/s.",
                      100 * io_share, rate);
      const double record_kib =
          s.records ? static_cast<double>(s.bytes) / static_cast<double>(s.records) / 1024 : 0;
      if (s.order == "shuffled" && record_kib > 0 && record_kib < 1024) {
        v.summary += fmt(" In full random order these are random reads of %.0f KiB, far below "
                         "a device's sequential rate.", record_kib);
        v.suggestion = "the data is probably not in the page cache: use "
                       "sample_order::block_shuffled, which reads whole storage blocks and "
                       "decode units, advised ahead of the window (posix_fadvise), at the "
                       "device's sequential rate; or put the shards in RAM (tmpfs)";
      } else {
        v.suggestion = "the data is probably not in the page cache: put the shards on faster "
                       "storage or in RAM (tmpfs), pack small files into larger shards, or add "
                       "workers to keep more I/O in flight";
      }
    } else if (s.decode && s.decode->chunks_decoded == 0) {
      // The source decodes, but read only uncompressed records: "decode" and its advice (store
      // uncompressed, raise the cache, repack) would name work that never ran.
      v.stage = bottleneck::read;
      v.summary = fmt(workers > 1 ? "Reading records bounds throughput: workers are busy %.0f %% "
                                    "of the time, %.0f %% of it on a CPU."
                                  : "Reading records bounds throughput: the worker is busy %.0f "
                                    "%% of the time, %.0f %% of it on a CPU.",
                      100 * busy, 100 * cpu_share);
      v.summary += " No chunk was decompressed: the CPU time is copying records (page cache).";
      v.suggestion = core_advice(copying_advice);
      explain_per_record();
    } else {
      v.stage = bottleneck::decode;
      v.summary = fmt(workers > 1 ? "CPU work in the workers bounds throughput (decompression, "
                                    "parsing): workers are busy %.0f %% of the time, %.0f %% of "
                                    "it on a CPU."
                                  : "CPU work in the worker bounds throughput (decompression, "
                                    "parsing): the worker is busy %.0f %% of the time, %.0f %% "
                                    "of it on a CPU.",
                      100 * busy, 100 * cpu_share);
      // Chunks were decoded (none: the read stage above); without decode_stats (LMDB,
      // in-memory sources) there is no chunk codec to advise against.
      v.suggestion = core_advice(s.decode ? "every core is already reading: store shards "
                                            "uncompressed or with a cheaper filter, or move "
                                            "decoding to the GPU"
                                          : copying_advice);
      if (s.decode) {
        const detail::explanation e = detail::explain_decode(s);
        v.summary += e.sentence;
        if (!e.suggestion.empty()) v.suggestion = e.suggestion;
      } else {
        explain_per_record();
      }
    }
    if (stall < 0.10)
      v.summary += fmt(" The consumer waited only %.0f %% of its time: the workers only just "
                       "keep up, and a faster GPU step would wait for them.", 100 * stall);
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
