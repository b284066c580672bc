// gpufeed::detail — what the loader's planner, workers and consumer share: the resolved setup,
// the engine, the slots, the slot ledger (slot_ledger.hpp: every acquire and return of a staging
// slot, target slot or window credit, and the invariant that keeps them deadlock-free) and the
// work queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <optional>
#include <vector>

#include "gpufeed/bounded_queue.hpp"
#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/detail/loader/delivery.hpp"
#include "gpufeed/detail/loader/device_stage.hpp"
#include "gpufeed/detail/loader/slot_ledger.hpp"
#include "gpufeed/detail/loader/telemetry.hpp"
#include "gpufeed/detail/loader/trace.hpp"
#include "gpufeed/detail/loader/types.hpp"
#include "gpufeed/detail/numa/loader_placement.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed::detail::loading {

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
  // `decode`: the device decode stage's plan, when the loader decodes on its device.
  loader_state(pipeline_setup&& s, std::unique_ptr<transfer_engine> e, slot_counts n,
               const std::optional<device_decode_plan>& decode = std::nullopt)
      : setup(std::move(s)), engine(std::move(e)), counts(n), meter(n.workers),
        timeline(n.workers, n.trace_events), slots(n.staging, n.target, n.prefetch),
        work(n.tasks), ready(n.max_held, n.target),
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
    }
    if (timeline.on())
      if (engine_probe* p = engine->probe()) p->record_copy_spans(timeline.capacity());
    engine->configure(l.slot_bytes(), c.transform_output_bytes, n.target, c.streams);
    if (decode) {
      engine->decoder()->configure_decode(decode->cache_bytes(), decode->work.area_bytes());
      device = std::make_unique<device_stage>(*decode, mr, n.staging, n.target);
    }
    for (std::size_t d = 0; d < n.target; ++d) mirrors[d].resize(l.data_offset() / 8);
  }

  // Closes every queue: blocked threads return.
  void close() noexcept {
    slots.close();
    work.close();
    ready.stop();
  }

  pipeline_setup setup;
  std::unique_ptr<transfer_engine> engine;
  slot_counts counts;
  telemetry meter;
  tracer timeline;
  slot_ledger slots;  // every staging slot, target slot and window credit, taken and returned
  bounded_queue<chunk_task> work;
  ready_queue ready;
  // Declared before the slots: its resource frees them last.
  numa::loader_placement numa;
  std::vector<staging_slot> staging;
  std::vector<std::vector<std::uint64_t>> mirrors;  // per target slot: host copy of metadata
  // Decoding on the device (device_stage.hpp); null when the loader decodes on the host.
  // Declared after the slot resource: its pinned work areas come from it too.
  std::unique_ptr<device_stage> device;
};

}  // namespace gpufeed::detail::loading
