// gpufeed::detail — the loader's planner and workers.
//
//   planner   takes a window credit (at most `prefetch` batches between it and the consumer) and a
//             free staging slot, plans the batch into it (planning.hpp) and queues it as tasks.
//   workers   read each task's records straight into their final place in the staging slot (with
//             a per-record transform: into the worker's scratch, and the transform writes its
//             output in that place, record_stage.hpp); the
//             worker that finishes a batch's last task applies the error policy, takes a free
//             target slot and hands the batch to the engine (one copy() and complete() per
//             batch: one H2D copy on a device, nothing on the host target), then puts it on the
//             ready queue.
// Every slot and credit is taken and returned through the slot ledger (slot_ledger.hpp); staging
// slots come back through the engine's reclaim(), which the planner polls: an event query per
// copy in flight, never a wait, so no thread blocks on the device in steady state.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <unistd.h>
#include <vector>

#include "gpufeed/detail/loader/delivery.hpp"
#include "gpufeed/detail/loader/device_stage.hpp"
#include "gpufeed/detail/loader/handoff.hpp"
#include "gpufeed/detail/loader/planning.hpp"
#include "gpufeed/detail/loader/read_stage.hpp"
#include "gpufeed/detail/loader/read_ahead.hpp"
#include "gpufeed/detail/loader/record_stage.hpp"
#include "gpufeed/detail/loader/state.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail::loading {

template <source Source>
class producer {
 public:
  producer(const Source& src, loader_state& state)
      : source_(src), s_(state),
        read_ahead_(src, state.setup, state.device ? &state.device->plan() : nullptr),
        handoff_(src, state) {}

  // Nothing the planner throws leaves its thread: a batch it cannot plan fails with the error
  // (plan_batch's), and anything else fails the next batch and ends the stream there.
  void plan_loop(std::stop_token st) {
    std::uint64_t sequence = 0;
    try {
      plan_batches(st, sequence);
    } catch (...) {
      ready_entry e;
      e.meta.sequence = sequence;
      e.error = std::current_exception();
      s_.ready.put(std::move(e));
      s_.ready.end_at(sequence + 1);
    }
  }

  void plan_batches(std::stop_token st, std::uint64_t& sequence) {
    const pipeline_setup& p = s_.setup;
    sampler_state at = p.start;
    std::uint64_t number = p.order.batch_number(at);  // this rank's batch within the epoch
    for (;;) {
      if (p.config.epochs && at.epoch >= p.config.epochs) {
        s_.ready.end_at(sequence);
        return;
      }
      const auto t0 = steady::now();
      const std::int64_t w0 = s_.timeline.now();
      if (!s_.slots.take_credit(st)) return;
      auto s = s_.slots.take_staging(
          st, s_.engine->delivers_in_place(),
          [this](std::vector<std::size_t>& done) { s_.engine->reclaim(done); });
      if (!s) return;
      s_.meter.planner_waited(since_ns(t0));
      const std::int64_t w1 = s_.timeline.now();
      staging_slot& slot = s_.staging[*s];
      slot.meta = batch_meta{};
      slot.meta.epoch = at.epoch;
      slot.meta.number = number;
      slot.meta.position = at.position;
      slot.meta.sequence = sequence++;
      const sampler_state next = p.order.advance(at);
      slot.meta.last_in_epoch = next.epoch != at.epoch;
      slot.meta.record_bytes = p.record_bytes;
      slot.meta.output_bytes = p.config.transform_output_bytes;
      slot.meta.on_device = !p.config.target.is_host();
      slot.failures.clear();
      slot.error = nullptr;
      slot.host_only = false;
      if (s_.device) s_.device->work(*s).reset(slot.meta.sequence);
      const auto planned = read_ahead_.planning(at);
      const auto& ahead = planned.ahead;
      slot.reads_mark = planned.reads_mark;
      try {
        if (p.tasks_fill_records)
          plan_batch_shape(p, slot);  // the tasks fill their records (run_task)
        else
          plan_batch(source_, p, slot);
        if (slot.meta.records) {
          const std::uint64_t* idx = slot_layout::indices(slot.buffer.data(), p.layout());
          if (p.sorted_tasks) sort_positions(slot, idx);
          split_tasks(source_, *s, idx, slot.meta.records, p.config.chunk_records, p.unit_tasks,
                      tasks_);
          slot.pending.store(tasks_.size(), std::memory_order_relaxed);
          // Behind the batch's own tasks: its share of the next window to decode ahead
          // (read_ahead.hpp), cut into at most one contiguous run of slots per worker. Decoding
          // on the device, the share is staged into the batch's work as tasks of the batch (it
          // is decoded in the batch's launch, before the next window's batches gather from it);
          // read_ahead_ gives none when the device plan stages no window ahead.
          const bool device = s_.device != nullptr;
          if (ahead) {
            const std::uint64_t n = ahead->end - ahead->first;
            const std::uint64_t parts = std::min<std::uint64_t>(n, p.config.workers);
            for (std::uint64_t k = 0; k < parts; ++k)
              tasks_.push_back(chunk_task{
                  device ? *s : decode_ahead_task,
                  static_cast<std::size_t>(ahead->first + n * k / parts),
                  static_cast<std::size_t>(ahead->first + n * (k + 1) / parts), ahead->epoch,
                  ahead->window, device});
            if (device) slot.pending.fetch_add(parts, std::memory_order_relaxed);
          }
        }
      } catch (...) {
        slot.error = std::current_exception();
        slot.meta.records = 0;
      }
      number = next.epoch != at.epoch ? 0 : number + 1;
      at = next;
      s_.timeline.add(s_.timeline.planner(), "wait for slot", w0, w1, slot.meta.sequence);
      s_.timeline.add(s_.timeline.planner(), "plan", w1, s_.timeline.now(), slot.meta.sequence);
      // The batch's share of the next window's advice (read_ahead.hpp): behind its tasks, so
      // that walking pages already cached does not hold them back, unless it reads there too.
      if (planned.advise_first) read_ahead_.advise(planned.advice);
      if (slot.error || slot.meta.records == 0) {
        handoff_.finish(*s, st);
        if (!planned.advise_first) read_ahead_.advise(planned.advice);
        continue;
      }
      // One lock and one wake-up for the whole batch: a notify per chunk cost ~3 us each.
      if (!s_.work.push_all(std::span<chunk_task>(tasks_), st)) return;
      if (!planned.advise_first) read_ahead_.advise(planned.advice);
    }
  }

  // No exception leaves a worker thread (it would be std::terminate): whatever a task throws
  // outside its records' reads and transforms (which the error policy handles) fails that task's
  // batch; a worker that cannot start (its reader cannot be made) fails every batch task it takes
  // with that error, so the consumer receives it instead of waiting for ever.
  void work_loop(std::stop_token st, worker_id w) {
    std::exception_ptr broken;
    try {
      run_tasks(st, w);
      return;
    } catch (...) {
      broken = std::current_exception();
    }
    while (auto task = s_.work.pop(st))
      if (task->slot != decode_ahead_task) task_failed(*task, broken, st);
  }

 private:
  void run_tasks(std::stop_token st, worker_id w) {
    auto reader = make_reader(source_);
    record_stage<Source> stage(source_, s_.setup);
    std::vector<std::size_t> late;  // a task's positions whose reads were deferred
    worker_counters& c = s_.meter.worker(w);
    trace_track* track = s_.timeline.worker(w);
    c.tid.store(static_cast<long>(::gettid()));
    for (;;) {
      auto task = s_.work.try_pop();
      if (!task) {
        reader_idle(reader);  // e.g. LMDB: end the read transaction while nothing is queued
        const auto t0 = steady::now();
        task = s_.work.pop(st);
        c.idle_ns.fetch_add(s_.meter.since_consumer_start_ns(t0), std::memory_order_relaxed);
        if (!task) return;
      }
      if (task->slot == decode_ahead_task) {  // skipped, and cut short, once stop is requested
        const auto t0 = steady::now();
        read_ahead_.decode_ahead(reader, task->epoch, task->window, task->begin, task->end, st);
        c.read_ns.fetch_add(since_ns(t0), std::memory_order_relaxed);
        continue;
      }
      if (task->stage_ahead) {  // a batch's share of the next window, staged for the device
        if constexpr (device_decoding_source<Source>) {
          const auto t0 = steady::now();
          read_ahead_.stage_ahead(reader, task->epoch, task->window, task->begin, task->end,
                                  s_.device->work(task->slot), s_.device->directory());
          c.read_ns.fetch_add(since_ns(t0), std::memory_order_relaxed);
        }
        if (s_.staging[task->slot].pending.fetch_sub(1, std::memory_order_acq_rel) == 1)
          handoff_.finish(task->slot, st);
        continue;
      }
      // Marked before the first read of the batch's windows: decode-ahead tasks for them stop.
      read_ahead_.reading(s_.staging[task->slot].reads_mark);
      try {
        run_task(reader, stage, *task, w, late, c, track);
      } catch (...) {
        task_failed(*task, std::current_exception(), st);
        continue;
      }
      if (s_.staging[task->slot].pending.fetch_sub(1, std::memory_order_acq_rel) == 1)
        handoff_.finish(task->slot, st);
    }
  }

  // Reads (and transforms) task t's records into its staging slot.
  template <class Reader>
  void run_task(Reader& reader, record_stage<Source>& stage, const chunk_task& t, worker_id w,
                std::vector<std::size_t>& late, worker_counters& c, trace_track* track) {
    const slot_layout l = s_.setup.layout();
    staging_slot& slot = s_.staging[t.slot];
    const bool transform = static_cast<bool>(s_.setup.config.per_record);
    const auto t0 = steady::now();
    std::uint64_t bytes = 0, failures = 0, transform_ns = 0;
    if (s_.setup.tasks_fill_records) fill_task_records(source_, s_.setup, slot, t.begin, t.end);
    if (transform) {
      probe_range range(s_.engine->probe(), "gpufeed read + transform");
      bytes = stage.run(reader, slot, l, t.begin, t.end, failures, transform_ns);
    } else if (s_.device) {
      if constexpr (device_decoding_source<Source>) {
        probe_range range(s_.engine->probe(), "gpufeed stage for the device");
        const std::size_t* order = s_.setup.sorted_tasks ? slot.read_order.data() : nullptr;
        bytes = stage_records(reader, slot, l, t.begin, t.end, order, s_.device->work(t.slot),
                              s_.device->directory(), failures);
      }
    } else {
      probe_range range(s_.engine->probe(), "gpufeed read");
      const std::size_t* order = s_.setup.sorted_tasks ? slot.read_order.data() : nullptr;
      bytes = read_records(reader, slot, l, t.begin, t.end, order, w.value,
                           s_.setup.config.workers, late, failures);
    }
    const std::uint64_t wall = since_ns(t0);
    c.read_ns.fetch_add(wall, std::memory_order_relaxed);
    if (transform) c.transform_ns.fetch_add(transform_ns, std::memory_order_relaxed);
    s_.timeline.add_ending_now(track, transform ? "read + transform" : "read", wall,
                               slot.meta.sequence);
    c.records.fetch_add(t.end - t.begin, std::memory_order_relaxed);
    c.bytes.fetch_add(bytes, std::memory_order_relaxed);
    c.chunks.fetch_add(1, std::memory_order_relaxed);
    c.failures.fetch_add(failures, std::memory_order_relaxed);
  }

  // Task t of a batch threw `e` outside its records' own error handling: the batch fails with
  // it under every policy (a fatal failure), and the task counts as done.
  void task_failed(const chunk_task& t, std::exception_ptr e, std::stop_token st) {
    staging_slot& slot = s_.staging[t.slot];
    try {
      std::lock_guard lock(slot.failure_mutex);
      slot.failures.push_back(record_failure{t.begin, std::move(e), true});
    } catch (...) {  // no room for the failure: the batch still fails
      slot.error = std::current_exception();
    }
    if (slot.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) handoff_.finish(t.slot, st);
  }

  // sorted_tasks: the batch's positions in record order, so that each task (a range of them)
  // holds whole runs of the few units it touches — a reader pins a unit once for its run
  // (band_hold.hpp) and tasks of one batch share almost no unit — rotated by a per-batch offset,
  // so that the batches in flight do not all start on the window's lowest units.
  void sort_positions(staging_slot& slot, const std::uint64_t* idx) {
    const std::size_t n = slot.meta.records;
    auto& order = slot.read_order;
    order.resize(n);
    for (std::size_t k = 0; k < n; ++k) order[k] = k;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return idx[a] < idx[b]; });
    const std::uint64_t spread = slot.meta.sequence * 0x9E3779B97F4A7C15ull;  // Fibonacci hashing
    std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>((spread >> 32) % n),
                order.end());
  }

  const Source& source_;
  loader_state& s_;
  std::vector<chunk_task> tasks_;       // planner only: a batch's tasks before hand-off
  window_read_ahead<Source> read_ahead_;  // planner; workers call its const decode_ahead()
  batch_handoff<Source> handoff_;
};

}  // namespace gpufeed::detail::loading
