// gpufeed::detail — what the loader's planner, workers and consumer share: the resolved setup,
// the engine, the slots and the queues between them.
//
// Slot accounting: target slots = prefetch + max_held; staging slots = prefetch, plus max_held
// when the engine delivers in place (the consumer then holds staging slots). The window bounds
// undelivered batches by `prefetch` (credits) and next() refuses to exceed max_held, so a batch
// that completes always finds a free target slot: no deadlock whatever order chunks complete in.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <stop_token>
#include <vector>

#include "gpufeed/bounded_queue.hpp"
#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/detail/loader/delivery.hpp"
#include "gpufeed/detail/loader/telemetry.hpp"
#include "gpufeed/detail/loader/trace.hpp"
#include "gpufeed/detail/loader/types.hpp"
#include "gpufeed/detail/numa/loader_placement.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed::detail {

// Every size loader_state's members are built with, computed before any of them exists.
struct slot_counts {
  std::size_t staging = 0, target = 0, tasks = 0;
  std::size_t workers = 0, prefetch = 0, max_held = 0, trace_events = 0;

  static slot_counts of(const loader_config& c, const transfer_engine& engine) noexcept {
    slot_counts n;
    n.workers = c.workers;
    n.prefetch = c.prefetch;
    n.max_held = c.max_held_batches;
    n.trace_events = c.trace_events;
    n.target = c.prefetch + c.max_held_batches;
    n.staging = engine.delivers_in_place() ? n.target : c.prefetch;
    const std::size_t chunks = (c.batch_size + c.chunk_records - 1) / c.chunk_records;
    n.tasks = c.prefetch * chunks + 1 + 2 * c.workers;  // + two windows' decode-ahead tasks
    return n;
  }
};

class loader_state {
 public:
  // Allocates every slot (the only allocation of slot memory) and configures the engine. Each
  // member is built from the arguments alone, never from another member, except the NUMA
  // placement, which asks the (already built) setup and engine where the target is.
  loader_state(pipeline_setup&& s, std::unique_ptr<transfer_engine> e, slot_counts n)
      : setup(std::move(s)), engine(std::move(e)), counts(n), meter(n.workers),
        timeline(n.workers, n.trace_events), credits(n.prefetch), free_staging(n.staging),
        free_target(n.target), work(n.tasks), ready(n.max_held, n.target),
        numa(setup.config.numa, setup.config.target.name(), engine->pci_bus_id()),
        staging(n.staging), mirrors(n.target) {
    const loader_config& c = setup.config;
    const slot_layout l = setup.layout();
    std::pmr::memory_resource* mr =
        numa.staging(numa.node() >= 0 && !c.staging_memory ? engine->staging_resource_on(numa.node())
                                                           : nullptr,
                     c.staging_memory ? c.staging_memory : engine->staging_resource(),
                     c.staging_memory != nullptr);
    for (std::size_t k = 0; k < staging.size(); ++k) {
      staging[k].buffer = resource_buffer(mr, l.slot_bytes());
      numa.check_slot(staging[k].buffer.data(), staging[k].buffer.size());
      if (c.per_record && !c.per_record.is_fixed()) staging[k].output_sizes.resize(l.batch_size);
      free_staging.push(k);
    }
    if (timeline.on())
      if (engine_probe* p = engine->probe()) p->record_copy_spans(timeline.capacity());
    engine->configure(l.slot_bytes(), c.transform_output_bytes, n.target, c.streams);
    for (std::size_t d = 0; d < n.target; ++d) {
      mirrors[d].resize(l.data_offset() / 8);
      free_target.push(d);
    }
    for (std::size_t k = 0; k < c.prefetch; ++k) credits.push(0);
  }

  // Staging slot s may be planned again; wakes a planner waiting for one.
  void give_back_staging(std::size_t s) noexcept {
    free_staging.try_push(s);  // never full: every slot index is in at most one place
    staging_returned();
  }
  // A staging slot may have become reclaimable (a batch was released).
  void staging_returned() noexcept {
    {
      std::lock_guard lock(return_mutex);
      ++returns;
    }
    return_cv.notify_one();
  }

  // Closes every queue: blocked threads return.
  void close() noexcept {
    credits.close();
    free_staging.close();
    free_target.close();
    work.close();
    ready.stop();
    return_cv.notify_all();
  }

  pipeline_setup setup;
  std::unique_ptr<transfer_engine> engine;
  slot_counts counts;
  telemetry meter;
  tracer timeline;
  bounded_queue<int> credits;  // batches the planner may still run ahead of the consumer
  bounded_queue<std::size_t> free_staging;
  bounded_queue<std::size_t> free_target;
  bounded_queue<chunk_task> work;
  ready_queue ready;
  // Declared before the slots: its resource frees them last.
  numa::loader_placement numa;
  std::vector<staging_slot> staging;
  std::vector<std::vector<std::uint64_t>> mirrors;  // per target slot: host copy of metadata

  std::mutex return_mutex;
  std::condition_variable_any return_cv;
  std::uint64_t returns = 0;  // staging_returned() calls, under return_mutex
};

}  // namespace gpufeed::detail
