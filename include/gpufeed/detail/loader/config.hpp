// gpufeed::detail — resolving and validating a loader_config: every automatic (0 / dynamic)
// knob gets its value, and the facts the pipeline needs about the source are read once.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>

#include "gpufeed/detail/loader/slot_layout.hpp"
#include "gpufeed/detail/order/units.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/loader_config.hpp"
#include "gpufeed/remote_stats.hpp"
#include "gpufeed/sampler.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail::loading {

// A loader_config with workers, prefetch, streams, slot_data_bytes and chunk_records resolved,
// and what the pipeline needs to know about the source and the record order.
struct pipeline_setup {
  loader_config config;
  sampler order;
  std::size_t record_bytes = 0;  // fixed record size, 0 when records vary
  bool labels = false;           // the source has labels
  // Cut worker tasks where the source's decode unit changes (decode_unit_source, sequential
  // order, automatic task size): a task runs on past chunk_records to the end of its unit.
  bool unit_tasks = false;
  // Workers read a task's records in ascending record order, not batch order (block_shuffled
  // over decode units of more than one record: records of one band in a row; see
  // auto_chunk_grouped). Each still lands in its own place in the slot, so the batch is the same.
  bool sorted_tasks = false;
  sampler_state start;           // the first round to plan
  // The source's records per decode unit (loader_stats::records_per_decode_unit), and the
  // one-time notice the loader prints when shuffled order decodes whole units per record.
  double records_per_decode_unit = 1;
  std::string order_notice;
  // The one-time notice the loader prints when batch_size exceeds the records a rank gets per
  // epoch (without drop_last each epoch is then a single short batch).
  std::string size_notice;
  // Each worker task fills its own records' indices and labels (fill_task_records) instead of
  // the planner filling the whole batch: the keyed permutation per record, most of the planner's
  // work, is spread over the workers; the planner writes only the offsets (a stride).
  // Fixed-size records without a record transform, whose tasks are cut without looking at the
  // indices (not unit_tasks, not sorted_tasks).
  bool tasks_fill_records = false;
  // Neither the loader's type nor loader_config set the prefetch depth: the pipeline may deepen
  // it where decoding on the device (device_decode_prefetch).
  bool automatic_prefetch = false;

  [[nodiscard]] slot_layout layout() const noexcept {
    return slot_layout{config.batch_size, config.slot_data_bytes};
  }
};

// block_shuffled's default window: units holding this many record bytes (a decoded-chunk cache
// holds one window): 8,192 records of 16 KiB, shuffled together.
inline constexpr std::size_t default_window_bytes = std::size_t{128} << 20;

// Shuffled order on decode units of at least this many records gets the notice below: each
// record read at random decodes that many records' worth.
inline constexpr double shuffled_notice_records = 4;

// The repack it suggests cuts chunks of a few records (as the verdict's advice does): repacking
// with pack's default chunk size would give units of as many records as the data has now.
// record_bytes 0 (records of varying size): the chunk size is left to the user.
inline std::string shuffled_cost_notice(double records_per_unit, std::uint64_t record_bytes) {
  const std::string n = std::to_string(static_cast<std::uint64_t>(records_per_unit));
  const std::string chunk =
      record_bytes ? std::to_string(std::max<std::uint64_t>(4, (4 * record_bytes + 1023) / 1024)) +
                         "KiB"
                   : "N";
  return "gpufeed: shuffled order on a source whose decode units (compressed chunks) hold " + n +
         " records: every record read at random decodes its whole unit, ~" + n +
         "x the bytes delivered. Use sample_order::block_shuffled (random over units, each "
         "decoded once per epoch), or repack into chunks of a few records: `gpufeed pack --from "
         "FILE.h5 --dataset NAME --compress lz4 --chunk-size " + chunk + "`.";
}

// Shuffled order over a source that reads shards remotely (remote_stats_source): each record read
// at random is a ranged GET of its own, a round trip per record to an object store.
// `records` per epoch of this rank, `per_unit` records per decode unit (a remote unit or band).
inline std::string remote_shuffled_notice(std::uint64_t records, double per_unit) {
  const std::uint64_t units = static_cast<std::uint64_t>(
      static_cast<double>(records) / std::max(1.0, per_unit) + 0.999);
  return "gpufeed: shuffled order over shards read remotely (HTTP/S3): every record is its own "
         "ranged GET, ~" + std::to_string(records) + " requests per epoch. Use "
         "sample_order::block_shuffled: it fetches whole units of a few MiB (~" +
         std::to_string(units) + " requests per epoch), each once per epoch and ahead of the "
         "window it is read in.";
}

// batch_size above a rank's records per epoch: without drop_last (with it, resolve_config throws)
// every epoch is one batch of fewer records, which a user sizing steps by batch_size would not
// expect.
inline std::string short_batch_notice(std::size_t batch_size, std::uint64_t rank_records,
                                      std::uint64_t records, std::uint32_t world) {
  std::string where = std::to_string(records) + " records";
  if (world > 1)
    where = std::to_string(rank_records) + " records per rank (" + where + " over " +
            std::to_string(world) + " ranks)";
  return "gpufeed: batch_size " + std::to_string(batch_size) + " is larger than the " + where +
         ": each epoch is one short batch of " + std::to_string(rank_records) +
         " records. Lower batch_size, or set drop_last to make this an error.";
}

// A loader_options value if fixed at compile time, else the config's, else the default.
inline std::size_t pick(std::size_t compile_time, std::size_t run_time, std::size_t fallback) {
  if (compile_time != dynamic) return compile_time;
  return run_time ? run_time : fallback;
}

// About 256 KiB of records per task, and enough tasks in the prefetch window (2 per worker)
// that no worker idles because batches are fewer than workers.
// The most records per task that still leave 2 tasks per worker in the prefetch window.
inline std::size_t records_for_parallelism(std::size_t batch, std::size_t workers,
                                           std::size_t prefetch) {
  const std::size_t min_chunks = (2 * workers + prefetch - 1) / prefetch;
  return std::max<std::size_t>(1, (batch + min_chunks - 1) / min_chunks);
}

inline std::size_t auto_chunk(std::size_t batch, std::size_t capacity, std::size_t workers,
                              std::size_t prefetch) {
  const std::size_t avg = std::max<std::size_t>(1, capacity / batch);
  const std::size_t by_bytes = std::max<std::size_t>(1, (256u << 10) / avg);
  const std::size_t by_parallelism = records_for_parallelism(batch, workers, prefetch);
  return std::clamp<std::size_t>(std::min(by_bytes, by_parallelism), 1, batch);
}

// block_shuffled over decode units: tasks of up to 8x auto_chunk's records (still enough tasks
// in the prefetch window, 2 per worker), read in record order (pipeline_setup::sorted_tasks), so
// a task's records of one band come one after another and its reader pins the band once for
// them (band_hold.hpp) instead of once per record.
inline std::size_t auto_chunk_grouped(std::size_t batch, std::size_t capacity, std::size_t workers,
                                      std::size_t prefetch) {
  const std::size_t base = auto_chunk(batch, capacity, workers, prefetch);
  const std::size_t by_parallelism = records_for_parallelism(batch, workers, prefetch);
  return std::clamp<std::size_t>(std::min(8 * base, by_parallelism), base, batch);
}

// The CPU's last-level cache in bytes (glibc's sysconf; 0 where it does not say).
inline std::size_t last_level_cache_bytes() noexcept {
  for (const int name : {_SC_LEVEL4_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long v = ::sysconf(name);
    if (v > 0) return static_cast<std::size_t>(v);
  }
  return 0;
}

// Prefetch depth for a target that copies from pinned slots, when neither the loader's type nor
// loader_config sets one: as many slots as fit a staging ring of max(64 MiB, a third of the
// last-level cache), at least 2 (one filling while one copies) and at most 8. Workers write a
// slot and the copy engine then reads it: while the ring stays in the CPU's cache, the copy reads
// lines the workers just wrote from the cache, not DRAM, and the workers' writes find their
// lines there. Rings much larger than that left the workers saturated and the loader short of
// the link (docs/measurements.md, "Large batches").
inline constexpr std::size_t staging_ring_floor = std::size_t{64} << 20;
inline std::size_t auto_prefetch(std::size_t slot_bytes, std::size_t cache_bytes) noexcept {
  const std::size_t ring = std::max(staging_ring_floor, cache_bytes / 3);
  return std::clamp<std::size_t>(ring / std::max<std::size_t>(1, slot_bytes), 2, 8);
}

template <source Source>
std::size_t slot_data_bytes(const Source& src, const loader_config& c, std::size_t record_bytes) {
  if (c.per_record) return c.per_record.output_bytes() * c.batch_size;  // checked not to overflow
  if (c.slot_data_bytes) return c.slot_data_bytes;
  if (record_bytes) return record_bytes * c.batch_size;
  if constexpr (requires { src.max_record_size(); }) {
    return std::max<std::size_t>(1, src.max_record_size() * c.batch_size);
  } else {
    throw config_error("records vary in size and the source has no max_record_size(): set "
                       "loader_config::slot_data_bytes");
  }
}

// Validates `c` against `src` and resolves it. `Options` is the loader's loader_options; `cores`
// the hardware threads (0 if unknown), `cache_bytes` the CPU's last-level cache (auto_prefetch).
// Throws config_error naming the setting at fault.
template <class Options, source Source>
pipeline_setup resolve_config(const Source& src, loader_config c,
                              unsigned cores = std::thread::hardware_concurrency(),
                              std::size_t cache_bytes = last_level_cache_bytes()) {
  // Default workers: all cores but two, which the planner and the consumer need (as many workers
  // as cores lost time to run-queue waits).
  c.workers = pick(Options::workers, c.workers, cores > 3 ? cores - 2 : 1);
  const bool automatic_prefetch = Options::prefetch == dynamic && c.prefetch == 0;
  c.streams = pick(Options::streams, c.streams, 2);
  if (c.batch_size == 0) throw config_error("batch_size must be at least 1");
  if (c.max_held_batches == 0) throw config_error("max_held_batches must be at least 1");
  if (c.transform_output_bytes && !c.transform)
    throw config_error("transform_output_bytes given without a transform");
  if (c.per_record) {
    const std::size_t out = c.per_record.output_bytes();
    if (out == 0) throw config_error("per_record: the record transform's output_bytes is 0");
    if (c.slot_data_bytes)
      throw config_error("slot_data_bytes is set with a per_record transform: slots are sized "
                         "from its output_bytes (batch_size x " + std::to_string(out) +
                         "); leave slot_data_bytes 0");
    if (out > (std::size_t{1} << 48) / c.batch_size)
      throw config_error("per_record: batch_size x output_bytes (" +
                         std::to_string(c.batch_size) + " x " + std::to_string(out) +
                         ") is too large for a slot");
  }

  // With a record transform, the delivered records are its outputs: fixed ones have its size,
  // bounded ones vary.
  const std::size_t record_bytes =
      c.per_record ? (c.per_record.is_fixed() ? c.per_record.output_bytes() : 0)
                   : fixed_record_size(src);
  const bool automatic_chunks = c.chunk_records == 0;
  c.slot_data_bytes = slot_data_bytes(src, c, record_bytes);
  c.prefetch = automatic_prefetch && !c.target.is_host()
                   ? auto_prefetch(c.slot_data_bytes, cache_bytes)
                   : pick(Options::prefetch, c.prefetch, 8);
  // Sorting a batch pays only where records share decode work: on units of one record (data
  // that needs no decode) a batch of a window touches each unit once, so the sort (a planner
  // cost per record, on one thread) would order reads that gain nothing from it.
  const double per_unit = records_per_decode_unit(src);
  const bool sorted_tasks = decode_unit_source<Source> && c.order == sample_order::block_shuffled &&
                            !c.per_record && per_unit > 1;
  if (automatic_chunks)
    c.chunk_records = sorted_tasks
                          ? auto_chunk_grouped(c.batch_size, c.slot_data_bytes, c.workers, c.prefetch)
                          : auto_chunk(c.batch_size, c.slot_data_bytes, c.workers, c.prefetch);

  sampler_options so;
  so.order = c.order;
  so.seed = c.resume ? c.resume->seed : c.seed;
  so.drop_last = c.drop_last;
  so.part = c.part;
  record_units units;
  if (c.order == sample_order::block_shuffled) {
    // Storage blocks hold the source's records: with a record transform, size units from
    // those, not from its outputs.
    std::size_t mean_bytes =
        record_bytes ? record_bytes : std::max<std::size_t>(1, c.slot_data_bytes / c.batch_size);
    if (c.per_record) {
      mean_bytes = fixed_record_size(src);
      if constexpr (requires { src.max_record_size(); })
        if (!mean_bytes) mean_bytes = src.max_record_size();
      mean_bytes = std::max<std::size_t>(1, mean_bytes ? mean_bytes : c.per_record.output_bytes());
    }
    units = units_of(src, block_records(mean_bytes));
    if (c.shuffle_window == 0) {
      const std::uint64_t unit_records =
          std::max<std::uint64_t>(1, src.size() / std::max<std::uint64_t>(1, units.size()));
      c.shuffle_window = std::max<std::size_t>(
          4, default_window_bytes / std::max<std::uint64_t>(1, unit_records * mean_bytes));
    }
    so.window = std::min<std::uint64_t>(c.shuffle_window, std::max<std::uint64_t>(1, units.size()));
    c.shuffle_window = static_cast<std::size_t>(so.window);
  }
  sampler order(src.size(), c.batch_size, so, std::move(units));
  if (order.batches_per_epoch() == 0)
    throw config_error("no full batch of " + std::to_string(c.batch_size) +
                       " records per epoch with drop_last (" +
                       std::to_string(order.records_per_epoch()) + " records per rank)");
  const sampler_state start = c.resume ? order.resumed(*c.resume) : order.first_state();
  std::string size_notice;
  if (order.records_per_epoch() < c.batch_size)
    size_notice =
        short_batch_notice(c.batch_size, order.records_per_epoch(), src.size(), order.part().world);

  // Sequential order only: in block_shuffled a batch's neighbours share a unit with probability
  // ~1/window, so tasks would be cut at chunk_records anyway; the decoded-chunk cache is what
  // decodes a unit once there.
  // Units of one record (data that needs no decode) have nothing to keep together.
  const bool unit_tasks = decode_unit_source<Source> && automatic_chunks &&
                          c.order == sample_order::sequential && per_unit > 1;
  const bool tasks_fill_records = record_bytes != 0 && !c.per_record && !unit_tasks &&
                                  !sorted_tasks;
  std::string notice;
  bool remote = false;
  if constexpr (remote_stats_source<Source>) remote = src.remote_stats().remote;
  if (c.order == sample_order::shuffled && remote)
    notice = remote_shuffled_notice(order.records_per_epoch(), per_unit);
  else if (c.order == sample_order::shuffled && per_unit >= shuffled_notice_records)
    notice = shuffled_cost_notice(per_unit, record_bytes);
  const bool labels = has_labels(src);
  return pipeline_setup{std::move(c), std::move(order), record_bytes,      labels, unit_tasks,
                        sorted_tasks, start,            per_unit,          std::move(notice),
                        std::move(size_notice), tasks_fill_records, automatic_prefetch};
}

}  // namespace gpufeed::detail::loading
