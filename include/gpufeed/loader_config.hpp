// gpufeed — how a loader is set up: loader_options (typed, compile-time checked values for
// workers, prefetch and streams), loader_config (run-time settings) and error_policy. A leaf vocabulary header: the loader's detail/ code reads these
// types directly, so a new setting is added here once.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory_resource>
#include <optional>

#include "gpufeed/numa.hpp"
#include "gpufeed/record_transform.hpp"
#include "gpufeed/sample_order.hpp"
#include "gpufeed/sampler.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed {

// "Chosen at run time" for a loader_options parameter (like std::dynamic_extent).
inline constexpr std::size_t dynamic = std::numeric_limits<std::size_t>::max();

// Workers, prefetch and streams fixed in the loader's type, their ranges checked at compile time.
// What they are, exactly: values, not code. The loader reads them once, when it is built
// (detail/loader/config.hpp, resolve_config), and from then on runs on the resulting run-time
// counts; no code is generated or specialised from them, so loader<S, loader_options<16, 8, 2>>
// runs the same code as loader<S> given workers = 16, prefetch = 8, streams = 2 in its
// loader_config. Per parameter:
//   fixed (not `dynamic`)  the value is used and loader_config's field of the same name is
//                          ignored: a fixed value cannot be overridden at run time.
//   dynamic                loader_config's field is used; 0 there means the default
//                          (workers: hardware threads - 2, or 1 on 3 threads or fewer;
//                          prefetch: 8, or on a GPU target as many batches as fit a staging
//                          ring of max(64 MiB, a third of the CPU's last-level cache), 2 to
//                          8; streams: 2).
// Use them to pin a set-up in a type (the presets below); use loader_config to choose at run time.

template <std::size_t Workers = dynamic, std::size_t Prefetch = dynamic,
          std::size_t Streams = dynamic>
struct loader_options {
  static constexpr std::size_t workers = Workers;
  static constexpr std::size_t prefetch = Prefetch;
  static constexpr std::size_t streams = Streams;
  static_assert(Workers == dynamic || (Workers >= 1 && Workers <= 1024),
                "loader_options: Workers must be 1..1024 (or gpufeed::dynamic)");
  static_assert(Prefetch == dynamic || (Prefetch >= 1 && Prefetch <= 256),
                "loader_options: Prefetch must be 1..256 batches (or gpufeed::dynamic)");
  static_assert(Streams == dynamic || (Streams >= 1 && Streams <= 32),
                "loader_options: Streams must be 1..32 (or gpufeed::dynamic)");
};

// Common set-ups. io_bound: many workers for page-cache/storage reads of small records;
// decode_bound: compressed shards, where workers decompress; latency: shallow prefetch for
// inference with small batches.
using default_options = loader_options<>;
using io_bound_options = loader_options<16, 8, 2>;
using decode_bound_options = loader_options<dynamic, 6, 2>;
using latency_options = loader_options<4, 2, 1>;

template <class T>
concept loader_options_type = requires {
  { T::workers } -> std::convertible_to<std::size_t>;
  { T::prefetch } -> std::convertible_to<std::size_t>;
  { T::streams } -> std::convertible_to<std::size_t>;
};

// What the loader does when a record cannot be read (I/O error, corrupt data, ...):
//   throw_error  the batch it broke is delivered as that error: next() rethrows it (default)
//   skip         the record is left out of its batch (the batch is shorter) and logged
//   substitute   the record is replaced by a good record of the same batch (same size) and logged;
//                where none fits, it is skipped
// A record that the per-record transform (loader_config::per_record) throws on counts as a
// record that cannot be read; substitute then takes any good record of the batch when outputs are
// bounded (record_transform.hpp). A failing transform hook fails the whole batch under every
// policy.
enum class error_policy { throw_error, skip, substitute };

// Where compressed records are decoded (docs/design.md, "GPU decode in the loader"):
//   automatic  on the target's device when it is a GPU, the source decodes there (hdf5_source:
//              chunks whose filters all have GPU decoders) and no per-record transform runs;
//              else in the workers
//   host       in the workers, on the CPU
//   device     on the device; a config_error, saying why, when it cannot be
// Records the device cannot take (another shard's filters, no room in its cache) are read in
// the workers either way, and a unit that fails to decode there is read again on the host, so
// errors name the record in the CPU path's words.
enum class decode_site { automatic, host, device };

struct loader_config {
  std::size_t batch_size = 256;
  ::gpufeed::target target = ::gpufeed::target::host();
  // A batch_size above a rank's records per epoch is one short batch per epoch (the loader says
  // so once on stderr); with drop_last it is a config_error.
  bool drop_last = false;
  std::uint64_t seed = 0;
  sample_order order = sample_order::shuffled;
  // block_shuffled: units shuffled together (the window); 0 = as many units as hold 128 MiB of
  // records, at least 4. A cache of decoded chunks needs one window's units.
  std::size_t shuffle_window = 0;
  // block_shuffled, sources whose readers decode ahead (hdf5_source): each batch's tasks are
  // followed by its share of the next window's units to decode, so the next window is decoded
  // while this one is read and its first batches need no burst of decodes; the decoded-chunk
  // cache then holds two windows. On by default (it removes the workers' idle time at window
  // starts: docs/design.md, "HDF5 compressed chunks"); false halves the cache for the same window.
  // Decoding on the device, the share is staged for the device with the batch instead.
  bool decode_ahead = true;
  decode_site decode = decode_site::automatic;
  // Device memory for decoded units when decoding there; 0 = automatic (two windows of
  // block_shuffled, or the batches in flight, at most 4 GiB).
  std::size_t device_cache_bytes = 0;
  std::optional<partition> part;          // nullopt: from the launcher's environment
  std::uint64_t epochs = 0;               // stop after this many epochs; 0 = never
  // Continue from a saved state (its seed wins), saved at any world size or batch size.
  std::optional<sampler_state> resume;
  error_policy on_error = error_policy::throw_error;
  // Used only where the matching loader_options parameter is `dynamic`; 0 = default
  // (workers: hardware threads - 2; prefetch: 8, or on a GPU target as many batches as fit in
  // max(64 MiB, a third of the CPU's last-level cache), 2 to 8; streams: 2).
  std::size_t workers = 0, prefetch = 0, streams = 0;
  std::size_t max_held_batches = 2;       // batches the consumer may hold at once
  // Record bytes per slot for sources whose records vary; 0 = batch_size x max_record_size().
  std::size_t slot_data_bytes = 0;
  std::size_t chunk_records = 0;          // records per worker task; 0 = automatic
  stream_handle consumer_stream = nullptr;  // the stream that consumes batches (device targets)
  // Runs in the workers on every record, writing its output into the slot; slots are then sized
  // from its output_bytes() (record_transform.hpp).
  record_transform per_record;
  transform_hook transform;               // runs after the copy, before hand-off
  std::size_t transform_output_bytes = 0;  // per-batch output buffer for the transform
  // Where host slots come from; nullptr = pinned memory on device targets, pageable on the host
  // target. On a device target it must be pinned (e.g. a counting_resource over
  // cuda::pinned_resource) or copies lose their asynchrony.
  std::pmr::memory_resource* staging_memory = nullptr;
  // NUMA node of the slots and of the planner's and workers' cores (gpufeed/numa.hpp): by
  // default the target device's node; numa_setting::on_node(n) or ::off(). stats().numa says
  // what was done.
  numa_setting numa;
  // Record a timeline for write_trace(): up to this many events per track (workers, planner,
  // consumer, streams); 0 = off. Tracing costs a clock read and a push_back per event.
  std::size_t trace_events = 0;
};

}  // namespace gpufeed
