// gpufeed::detail — the hand-off of a finished batch: the worker that completes its last task
// (or the planner, for a batch that failed at planning) applies the error policy, takes a free
// target slot and submits the batch to the engine (one copy() and complete(); on the device
// decode path assemble() in its place, in sequence order: device_stage.hpp), then puts it on
// the ready queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <stop_token>
#include <utility>
#include <vector>

#include "gpufeed/detail/loader/device_stage.hpp"
#include "gpufeed/detail/loader/error_policy.hpp"
#include "gpufeed/detail/loader/read_stage.hpp"
#include "gpufeed/detail/loader/record_stage.hpp"
#include "gpufeed/detail/loader/state.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail::loading {

template <source Source>
class batch_handoff {
 public:
  batch_handoff(const Source& src, loader_state& state) : source_(src), s_(state) {}

  // The batch in staging slot s is complete: apply the policy, hand it to the engine, deliver.
  // Once its copy is queued the staging slot belongs to the planner again (reclaim() may hand it
  // back before this returns): after copy() nothing here reads or writes the slot. A batch that
  // fails gives its slots back here, and only here: its ready entry carries the error and owns
  // no slot.
  void finish(std::size_t s, std::stop_token st) {
    staging_slot& slot = s_.staging[s];
    ready_entry e;
    if (s_.device && !slot.error && !slot.failures.empty()) read_on_host(slot);
    if (!slot.error) {
      try {
        std::lock_guard lock(slot.failure_mutex);
        const record_transform& f = s_.setup.config.per_record;
        if (f && !f.is_fixed())
          e.skipped =
              pack_bounded(slot, s_.setup.layout(), f.output_bytes(), s_.setup.config.on_error);
        else
          e.skipped = apply_error_policy(slot, s_.setup.layout(), s_.setup.config.on_error);
      } catch (...) {
        slot.error = std::current_exception();
      }
    }
    for (const auto& r : e.skipped) s_.meter.skipped(r);
    e.meta = slot.meta;
    e.error = slot.error;
    if (!e.error) {
      try {
        auto d = s_.slots.take_target(st);
        if (!d) return;
        e.slot = *d;
        e.has_slot = true;
      } catch (...) {
        e.error = std::current_exception();
      }
    }
    if (!s_.device) {
      deliver(s, std::move(e));
      return;
    }
    // The device decodes each unit for the batches after the one that stages it: in order.
    s_.device->in_order(e.meta.sequence, parked_batch{s, std::move(e)},
                        [this](parked_batch& b) { deliver(b.staging, std::move(b.entry)); });
  }


 private:
  // Submits the batch in staging slot s (entry e holds its target slot unless it failed) and
  // puts it on the ready queue. Never throws: a failure is the batch's error.
  void deliver(std::size_t s, ready_entry e) {
    staging_slot& slot = s_.staging[s];
    bool copy_queued = false, released = false;
    if (!e.error) {
      try {
        submit(slot, s, e.slot, copy_queued, released);
      } catch (...) {
        e.error = std::current_exception();
      }
    }
    if (s_.device && !released) {  // nothing of it reached the device: its work is still here
      dd::batch_work& w = s_.device->work(s);
      s_.device->submitted(w.pins(), w.staged(), true);
    }
    if (e.error) {
      e.meta.records = e.meta.data_bytes = 0;
      if (e.has_slot) {
        s_.slots.return_target(e.slot);  // complete() left it safe to refill
        e.has_slot = false;
      }
      if (copy_queued)
        s_.slots.staging_may_return();  // reclaim() returns it: wake a planner waiting on a release
      else
        s_.slots.return_staging(s);
    }
    s_.ready.put(std::move(e));
  }

  // The host copy of the metadata, one copy() of metadata + records, then the hook and the
  // ready mark, all on one stream. Everything needed after copy() is read from the slot before.
  // Device decode: assemble() in place of copy(), moving the records read on the host (all of
  // them, or none) and the work; what the batch gathered from is recorded for delivery first,
  // and its units released right after (`released`), in sequence order (in_order).
  void submit(staging_slot& slot, std::size_t s, std::size_t d, bool& copy_queued,
              bool& released) {
    const slot_layout l = s_.setup.layout();
    std::byte* base = slot.buffer.data();
    const batch_meta meta = slot.meta;
    const std::size_t stream = stream_of(meta.sequence);
    std::memcpy(s_.mirrors[d].data(), base, l.data_offset());
    if (s_.device) {
      dd::batch_work& w = s_.device->work(s);
      const bool gather = !slot.host_only;
      dd::work_image img = w.image(gather);
      img.data_offset = l.data_offset();
      const bool assemble = img.unit_count > 0 || img.run_count > 0;
      const device_stage::delivered& b = s_.device->record(d, w, assemble, img.run_count > 0);
      const bool records = !assemble || !gather || w.host_records();
      const std::size_t head = l.data_offset() + (records ? meta.data_bytes : 0);
      if (assemble)
        s_.engine->decoder()->assemble(d, stream, base, head, img, s);
      else
        s_.engine->copy(d, stream, base, head, s);
      copy_queued = true;
      s_.device->submitted(b.pins, b.staged, false);
      released = true;
    } else {
      s_.engine->copy(d, stream, base, l.data_offset() + meta.data_bytes, s);
      copy_queued = true;
    }
    const target_slot t = s_.engine->slot(d);
    s_.engine->complete(d, stream, s_.setup.config.transform,
                        view_at(meta, l, t.data, t.output, s_.setup.labels));
  }

  // Device decode: some records of the batch failed on the host, and the error policy rewrites
  // the batch in host memory, so every record is read there (those staged too) and the device
  // gathers none; the units it staged are still decoded, for the batches after it.
  void read_on_host(staging_slot& slot) {
    slot.host_only = true;
    slot.failures.clear();
    try {
      auto reader = make_reader(source_);
      std::vector<std::size_t> late;
      std::uint64_t failures = 0;
      read_records(reader, slot, s_.setup.layout(), 0, slot.meta.records, nullptr, 0, 1, late,
                   failures);
    } catch (...) {
      slot.error = std::current_exception();
    }
  }

  std::size_t stream_of(std::uint64_t sequence) const noexcept {
    return static_cast<std::size_t>(sequence % s_.setup.config.streams);
  }

  const Source& source_;
  loader_state& s_;
};

}  // namespace gpufeed::detail::loading
