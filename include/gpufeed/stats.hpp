// gpufeed — what the loader measured: per-stage times, stall, queue occupancy, bytes.
//
// Always on. Every counter is a relaxed atomic added to once per chunk of records (workers) or
// once per batch (planner, consumer, copies), so the cost is a few atomic adds per batch per
// stage; bench/ measures it against a loader with the counters compiled in but the batch loop
// unchanged (see README's performance section).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpufeed/batch.hpp"
#include "gpufeed/decode_stats.hpp"
#include "gpufeed/numa.hpp"
#include "gpufeed/remote_stats.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed {

struct worker_stats {
  std::uint64_t records = 0, bytes = 0, chunks = 0, failures = 0;
  double read_seconds = 0;  // inside the source's read (I/O + decode), wall time
  double transform_seconds = 0;  // of which inside the per-record transform (record_transform.hpp)
  double read_cpu_seconds = 0;  // CPU time of the worker thread (its reads, plus the small
                                // hand-off work around them; Linux schedstat)
  double runqueue_seconds = 0;  // runnable but waiting for a core (whole thread; Linux schedstat)
  double idle_seconds = 0;  // waiting for work (the pipeline ahead of it was full), counted from
                            // the consumer's first request
};

// Decoding on the device (loader_config::decode; docs/design.md, "GPU decode in the loader").
struct device_decode_stats {
  bool on = false;                    // the loader decodes on its device
  device_decode_counters device;      // what the engine did: units, bytes over the link, time
  std::uint64_t units_staged = 0;     // units the batches sent to the device to decode
  std::uint64_t units_staged_ahead = 0;  // of those, staged ahead of need (sequential order)
  std::size_t stage_ahead = 0;        // units a sequential batch stages past one it must stage
  std::uint64_t no_room = 0;          // unit claims refused (cache full): records read on the host
  std::uint64_t batches_redone = 0;   // batches read again on the host after a unit's decode failed
  std::size_t cache_places = 0;       // decoded units the device cache holds
  std::size_t peak_places = 0;        // the most it held at once
  std::uint64_t place_bytes = 0;      // device bytes of one place (a unit decoded, and its stage)
};

struct loader_stats {
  double elapsed_seconds = 0;          // wall time since the consumer's first next()
  std::uint64_t batches = 0;           // delivered to the consumer
  std::uint64_t records = 0;
  std::uint64_t bytes = 0;             // record bytes delivered
  double consumer_wait_seconds = 0;    // time next() blocked waiting for data (stall)
  double consumer_hold_seconds = 0;    // time batches spent with the consumer (its compute)
  double planner_wait_seconds = 0;     // planner waiting for a free slot (backpressure)
  std::vector<worker_stats> workers;
  transfer_counters transfer;          // H2D copies (device target)
  device_decode_stats device_decode;   // decoding on the device (device target)
  double ready_queue_mean = 0;         // batches ready when the consumer asked (mean)
  std::size_t ready_queue_capacity = 0;  // prefetch depth
  std::size_t pinned_bytes = 0;        // staging memory (pinned on device targets)
  std::size_t host_slot_bytes = 0;     // same, for host targets (pageable)
  std::size_t device_bytes = 0;        // device slots
  std::uint64_t skipped = 0, substituted = 0;
  std::vector<skipped_record> skipped_log;  // the most recent ones (bounded)
  std::size_t worker_count = 0, prefetch = 0, streams = 0, batch_size = 0;
  std::string target;
  // The epoch order (to_string(sample_order)), and the source's records per decode unit (median
  // of a sample; 1 where records decode alone): in shuffled order each record read decodes that
  // many records' worth. block_shuffled: the units it permutes and its window (units shuffled
  // together; a decoded-chunk cache holds one window).
  std::string order;
  double records_per_decode_unit = 1;
  std::uint64_t order_units = 0;
  std::size_t shuffle_window = 0;
  std::uint64_t trace_events_dropped = 0;  // timeline events past the per-track capacity
  // The source's decode counters over this loader's life (sources that report them:
  // decode_stats_source, e.g. hdf5_source; nullopt for the others). A source shared by several
  // loaders counts all their reads; peak and budget are the source's.
  std::optional<decode_stats> decode;
  // The source's remote requests over this loader's life (remote_stats_source with a shard named
  // by a URL; nullopt for local sources). Counts and times only, never a URL or credential.
  std::optional<remote_stats> remote;
  numa_stats numa;                     // where the slots and threads were placed, and checked

  [[nodiscard]] double records_per_second() const noexcept {
    return elapsed_seconds > 0 ? static_cast<double>(records) / elapsed_seconds : 0.0;
  }
  [[nodiscard]] double gb_per_second() const noexcept {
    return elapsed_seconds > 0 ? static_cast<double>(bytes) / elapsed_seconds / 1e9 : 0.0;
  }
  // Fraction of the consumer's time spent waiting for data: 0 = never starved. On a device
  // target this is the consumer's stream, measured on the device (the host thread only queues
  // work and runs ahead); on the host target, the consumer thread in next() against the time it
  // held batches.
  [[nodiscard]] double stall_fraction() const noexcept {
    if (transfer.timed_batches) {
      const double t = transfer.consumer_wait_seconds + transfer.consumer_busy_seconds;
      return t > 0 ? transfer.consumer_wait_seconds / t : 0.0;
    }
    const double t = consumer_wait_seconds + consumer_hold_seconds;
    return t > 0 ? consumer_wait_seconds / t : 0.0;
  }
  [[nodiscard]] double read_seconds() const noexcept {
    double s = 0;
    for (const auto& w : workers) s += w.read_seconds;
    return s;
  }
};

}  // namespace gpufeed
