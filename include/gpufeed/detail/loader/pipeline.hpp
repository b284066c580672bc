// gpufeed::detail — the loader's machinery: planner, workers, slots, delivery.
//
// Threads and hand-offs (docs/design.md, "Data path"):
//   planner   takes a window credit (at most `prefetch` batches between it and the consumer) and a
//             free host slot, writes the batch's indices, labels and offsets into the slot, and
//             queues the batch as chunks of records.
//   workers   read each chunk's records straight into their final place in the slot; the worker
//             that finishes a batch's last chunk applies the error policy and either hands the
//             slot to the transfer engine (device target: one H2D copy into a free device slot;
//             the planner reclaims the host slot once the copy's event has completed) or
//             delivers it as is (host target).
//   consumer  next() waits for the next batch in sequence order; on a device target its stream
//             waits on the batch's ready event. Releasing records the consumed event and returns
//             the slot.
// Slot accounting: host slots = prefetch (+ max_held on the host target, where the consumer
// holds host slots), device slots = prefetch + max_held. The window bounds undelivered batches
// by `prefetch` and next() refuses to exceed max_held, so a batch that completes always finds a
// free device slot: no deadlock whatever order chunks complete in.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <ostream>
#include <stop_token>
#include <thread>
#include <unistd.h>
#include <vector>

#include "gpufeed/bounded_queue.hpp"
#include "gpufeed/detail/loader/error_policy.hpp"
#include "gpufeed/detail/loader/telemetry.hpp"
#include "gpufeed/detail/loader/trace.hpp"
#include "gpufeed/detail/loader/types.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail {

template <source Source>
class pipeline final : public batch_owner, public std::enable_shared_from_this<pipeline<Source>> {
 public:
  pipeline(const Source& src, sampler smp, pipeline_config cfg, const target& tgt)
      : source_(src), sampler_(std::move(smp)), cfg_(std::move(cfg)), target_name_(tgt.name()),
        device_(tgt.device()), engine_(tgt.make_engine()), telemetry_(cfg_.workers),
        credits_(cfg_.prefetch), free_host_(host_slot_count()),
        free_device_(engine_ ? cfg_.prefetch + cfg_.max_held : 1),
        work_(cfg_.prefetch * chunks_per_batch() + 1) {
    std::pmr::memory_resource* mr = cfg_.staging ? cfg_.staging
                                    : engine_    ? engine_->staging_resource()
                                                 : pageable_resource::instance();
    slots_ = std::vector<host_slot>(host_slot_count());
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      slots_[s].buffer = resource_buffer(mr, cfg_.layout.slot_bytes());
      free_host_.push(s);
    }
    if (cfg_.trace_capacity) {
      for (std::size_t w = 0; w < cfg_.workers; ++w)
        tracks_.push_back(std::make_unique<trace_track>("worker " + std::to_string(w),
                                                        cfg_.trace_capacity));
      tracks_.push_back(std::make_unique<trace_track>("planner", cfg_.trace_capacity));
      tracks_.push_back(std::make_unique<trace_track>("consumer", cfg_.trace_capacity));
      if (engine_) engine_->record_copy_spans(cfg_.trace_capacity);
    }
    if (engine_) {
      const std::size_t device_slots = cfg_.prefetch + cfg_.max_held;
      engine_->configure(cfg_.layout.slot_bytes(), cfg_.output_bytes, device_slots, cfg_.streams);
      mirrors_.resize(device_slots);
      for (std::size_t d = 0; d < device_slots; ++d) {
        mirrors_[d].resize(cfg_.layout.data_offset() / 8);
        free_device_.push(d);
      }
    } else if (cfg_.output_bytes) {
      outputs_.resize(slots_.size());
      for (auto& o : outputs_) o = resource_buffer(pageable_resource::instance(), cfg_.output_bytes);
    }
    for (std::size_t c = 0; c < cfg_.prefetch; ++c) credits_.push(0);
  }

  ~pipeline() override {
    shutdown();
    if (engine_) engine_->drain();  // host callbacks reference free_host_; let them finish
  }

  // Starts the threads. Separate from the constructor so that they never see a half-built object.
  void start() {
    planner_ = std::jthread([self = this](std::stop_token st) { self->plan_loop(st); });
    for (std::size_t w = 0; w < cfg_.workers; ++w)
      workers_.emplace_back([self = this, w](std::stop_token st) { self->work_loop(st, w); });
  }

  // Stops and joins every thread. Batches the consumer still holds stay valid until released.
  void shutdown() noexcept {
    for (auto& w : workers_) w.request_stop();
    planner_.request_stop();
    credits_.close();
    free_host_.close();
    free_device_.close();
    work_.close();
    {
      std::lock_guard lock(ready_mutex_);
      stopped_ = true;
    }
    ready_cv_.notify_all();
    for (auto& w : workers_)
      if (w.joinable()) w.join();
    if (planner_.joinable()) planner_.join();
  }

  // The next batch in sequence, or nullopt when the configured epochs are done.
  std::optional<batch> next() {
    telemetry_.consumer_started();
    ready_entry e;
    const auto t0 = steady::now();
    std::size_t ready_now = 0;
    {
      std::unique_lock lock(ready_mutex_);
      if (held_ >= cfg_.max_held)
        throw config_error("the consumer holds " + std::to_string(held_) +
                           " batches; release one before asking for the next (or raise "
                           "max_held_batches)");
      ready_cv_.wait(lock, [&] {
        return stopped_ || ready_.count(next_sequence_) ||
               (end_sequence_ && next_sequence_ >= *end_sequence_);
      });
      if (end_sequence_ && next_sequence_ >= *end_sequence_) return std::nullopt;
      if (stopped_) throw cancelled_error("the loader was stopped");
      ready_now = ready_.size();
      auto it = ready_.find(next_sequence_);
      e = std::move(it->second);
      ready_.erase(it);
      ++next_sequence_;
      delivered_state_ = sampler_.advance(e.at);
      if (!e.error) ++held_;
    }
    credits_.push(0);  // the planner may run one batch further ahead
    const std::uint64_t waited = since_ns(t0);
    telemetry_.delivered(e.records, e.data_bytes, waited, ready_now);
    if (!tracks_.empty()) {
      const std::int64_t end = now_ns();
      consumer_track().add("wait for batch", end - static_cast<std::int64_t>(waited), end, e.sequence);
    }
    // A failed batch holds no slot: finish() returned its host and device slots when it failed.
    if (e.error) std::rethrow_exception(e.error);
    return make_batch(std::move(e));
  }

  // The state to restore to resume right after the last batch next() returned.
  sampler_state state() const {
    std::lock_guard lock(ready_mutex_);
    return delivered_state_ ? *delivered_state_ : cfg_.start;
  }

  void release_batch(std::size_t ticket, stream_handle consumer) noexcept override {
    const bool on_device = engine_ != nullptr;
    const std::size_t slot = ticket;
    {
      std::lock_guard lock(ready_mutex_);
      --held_;
      const held_mark& m = held_since_[slot % held_since_.size()];
      const std::uint64_t ns = since_ns(m.at);
      telemetry_.held(ns);
      if (!tracks_.empty()) {
        const std::int64_t end = now_ns();
        consumer_track().add("consume", end - static_cast<std::int64_t>(ns), end, m.sequence);
      }
    }
    release_slots(on_device, slot, slot, consumer);
  }

  loader_stats stats() const {
    loader_stats s;
    telemetry_.snapshot(s);
    if (engine_) s.transfer = engine_->counters();
    const std::size_t host_bytes = slots_.size() * cfg_.layout.slot_bytes();
    (engine_ ? s.pinned_bytes : s.host_slot_bytes) = host_bytes;
    s.device_bytes = engine_ ? engine_->device_bytes() : 0;
    s.ready_queue_capacity = cfg_.prefetch;
    s.worker_count = cfg_.workers;
    s.prefetch = cfg_.prefetch;
    s.streams = engine_ ? cfg_.streams : 0;
    s.batch_size = cfg_.layout.batch_size;
    s.target = target_name_;
    for (const auto& t : tracks_) s.trace_events_dropped += t->dropped();
    return s;
  }

  // Chrome-trace JSON of everything recorded so far (empty timeline when tracing is off).
  void write_trace(std::ostream& os) {
    std::vector<std::unique_ptr<trace_track>> streams;
    if (engine_ && !tracks_.empty()) {
      for (std::size_t i = 0; i < cfg_.streams; ++i)
        streams.push_back(std::make_unique<trace_track>("stream " + std::to_string(i) + " (H2D)",
                                                        cfg_.trace_capacity));
      for (const auto& c : engine_->copy_spans())
        streams[c.stream]->add("H2D copy", c.start_ns, c.end_ns, c.batch_bytes);
    }
    std::vector<const trace_track*> all;
    for (const auto& t : tracks_) all.push_back(t.get());
    for (const auto& t : streams) all.push_back(t.get());
    const std::int64_t origin = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    telemetry_.start().time_since_epoch()).count();
    write_chrome_trace(os, all, origin);
  }

  transfer_engine* engine() const noexcept { return engine_.get(); }

 private:
  trace_track& consumer_track() noexcept { return *tracks_[cfg_.workers + 1]; }
  trace_track& planner_track() noexcept { return *tracks_[cfg_.workers]; }

  std::size_t host_slot_count() const noexcept {
    return engine_ ? cfg_.prefetch : cfg_.prefetch + cfg_.max_held;
  }
  std::size_t chunks_per_batch() const noexcept {
    return (cfg_.layout.batch_size + cfg_.chunk_records - 1) / cfg_.chunk_records;
  }

  void release_slots(bool device, std::size_t d, std::size_t h, stream_handle consumer) noexcept {
    if (device) {
      engine_->consumer_release(d, consumer);
      free_device_.try_push(d);  // never full: every slot index is in at most one place
    } else {
      free_host_.try_push(h);
    }
  }

  // --- planner ---------------------------------------------------------------------------------
  void plan_loop(std::stop_token st) {
    std::uint64_t sequence = 0;
    sampler_state at = cfg_.start;
    const std::uint64_t per_epoch = sampler_.batches_per_epoch();
    for (;;) {
      if (cfg_.epochs && at.epoch >= cfg_.epochs) {
        {
          std::lock_guard lock(ready_mutex_);
          end_sequence_ = sequence;
        }
        ready_cv_.notify_all();
        return;
      }
      const auto t0 = steady::now();
      const std::int64_t w0 = tracks_.empty() ? 0 : now_ns();
      if (!credits_.pop(st)) return;
      auto s = acquire_host_slot(st);
      if (!s) return;
      telemetry_.planner_waited(since_ns(t0));
      const std::int64_t w1 = tracks_.empty() ? 0 : now_ns();
      host_slot& slot = slots_[*s];
      slot.sequence = sequence++;
      slot.at = at;
      slot.last_in_epoch = at.batch + 1 == per_epoch;
      slot.failures.clear();
      slot.error = nullptr;
      try {
        plan(slot);
      } catch (...) {
        slot.error = std::current_exception();
        slot.records = 0;
      }
      at = sampler_.advance(at);
      if (!tracks_.empty()) {
        planner_track().add("wait for slot", w0, w1, slot.sequence);
        planner_track().add("plan", w1, now_ns(), slot.sequence);
      }
      if (slot.error || slot.records == 0) {
        finish(*s, st);
        continue;
      }
      split_tasks(*s, slot);
      slot.pending.store(tasks_.size(), std::memory_order_relaxed);
      // One lock and one wake-up for the whole batch: a notify per chunk cost ~3 us each.
      if (!work_.push_all(std::span<chunk_task>(tasks_), st)) return;
    }
  }

  // A free host slot. On a device target, slots come back when their copy has finished: the
  // planner asks the engine (an event query per copy in flight, never a wait), then backs off
  // briefly — yielding first, so a slot freed microseconds later is taken at once.
  std::optional<std::size_t> acquire_host_slot(std::stop_token st) {
    if (!engine_) return free_host_.pop(st);
    for (unsigned idle = 0;; ++idle) {
      if (auto s = free_host_.try_pop()) return s;
      reclaimed_.clear();
      engine_->reclaim(reclaimed_);
      for (std::size_t t : reclaimed_) free_host_.try_push(t);
      if (!reclaimed_.empty()) continue;
      if (st.stop_requested()) return std::nullopt;
      if (idle < 64)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // The batch's worker tasks, into tasks_: chunk_records positions each, or with unit_tasks,
  // at least that many and on while the next record shares the last one's decode unit (at most
  // 8 x chunk_records, so a huge chunk still spreads over workers; each decodes it once). Units
  // are asked for only past chunk_records: two calls per task where no run continues.
  void split_tasks(std::size_t s, const host_slot& slot) {
    tasks_.clear();
    const std::size_t n = slot.records, step = cfg_.chunk_records;
    for (std::size_t begin = 0; begin < n;) {
      std::size_t end = std::min(n, begin + step);
      if constexpr (decode_unit_source<Source>) {
        if (cfg_.unit_tasks && end < n) {
          const std::uint64_t* idx = slot_layout::indices(slot.buffer.data(), cfg_.layout);
          const std::uint64_t unit = source_.decode_unit(idx[end - 1]);
          const std::size_t cap = std::min(n, begin + 8 * step);
          while (end < cap && source_.decode_unit(idx[end]) == unit) ++end;
        }
      }
      tasks_.push_back(chunk_task{s, begin, end});
      begin = end;
    }
  }

  void plan(host_slot& slot) {
    std::byte* base = slot.buffer.data();
    const slot_layout& l = cfg_.layout;
    std::uint64_t* idx = slot_layout::indices(base, l);
    std::int64_t* lab = slot_layout::labels(base, l);
    std::uint64_t* off = slot_layout::offsets(base, l);
    slot.records = sampler_.batch(slot.at.epoch, slot.at.batch, std::span(idx, l.batch_size));
    std::uint64_t cursor = 0;
    for (std::size_t k = 0; k < slot.records; ++k) {
      off[k] = cursor;
      cursor += cfg_.record_bytes ? cfg_.record_bytes : source_.record_size(idx[k]);
      if (cfg_.labels) {
        if constexpr (labeled_source<Source>) lab[k] = source_.label(idx[k]);
      } else {
        lab[k] = 0;
      }
    }
    off[slot.records] = cursor;
    if (cursor > l.data_capacity)
      throw config_error("batch " + std::to_string(slot.at.batch) + " of epoch " +
                         std::to_string(slot.at.epoch) + " needs " + std::to_string(cursor) +
                         " bytes but a slot holds " + std::to_string(l.data_capacity) +
                         " (raise slot_data_bytes)");
    slot.data_bytes = cursor;
  }

  // --- workers ---------------------------------------------------------------------------------
  void work_loop(std::stop_token st, std::size_t w) {
    auto reader = make_reader(source_);
    worker_counters& c = telemetry_.worker(w);
    c.tid.store(static_cast<long>(::gettid()));
    for (;;) {
      auto task = work_.try_pop();
      if (!task) {
        reader_idle(reader);  // e.g. LMDB: end the read transaction while nothing is queued
        const auto t0 = steady::now();
        task = work_.pop(st);
        c.idle_ns.fetch_add(since_ns(t0), std::memory_order_relaxed);
        if (!task) return;
      }
      host_slot& slot = slots_[task->slot];
      std::byte* base = slot.buffer.data();
      const std::uint64_t* idx = slot_layout::indices(base, cfg_.layout);
      const std::uint64_t* off = slot_layout::offsets(base, cfg_.layout);
      std::byte* data = slot_layout::data(base, cfg_.layout);
      if (engine_) engine_->range_push("gpufeed read");
      const auto t0 = steady::now();
      std::uint64_t bytes = 0, failures = 0;
      for (std::size_t k = task->begin; k < task->end; ++k) {
        try {
          reader.read(idx[k], std::span(data + off[k], off[k + 1] - off[k]));
          bytes += off[k + 1] - off[k];
        } catch (...) {
          ++failures;
          std::lock_guard lock(slot.failure_mutex);
          slot.failures.push_back(record_failure{k, std::current_exception()});
        }
      }
      const std::uint64_t wall = since_ns(t0);
      c.read_ns.fetch_add(wall, std::memory_order_relaxed);
      if (engine_) engine_->range_pop();
      if (!tracks_.empty()) {
        const std::int64_t end = now_ns();
        tracks_[w]->add("read", end - static_cast<std::int64_t>(wall), end, slot.sequence);
      }
      c.records.fetch_add(task->end - task->begin, std::memory_order_relaxed);
      c.bytes.fetch_add(bytes, std::memory_order_relaxed);
      c.chunks.fetch_add(1, std::memory_order_relaxed);
      c.failures.fetch_add(failures, std::memory_order_relaxed);
      if (slot.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(task->slot, st);
    }
  }

  // The batch in host slot s is complete: apply the policy, move it to the target, deliver.
  // Once its copy is queued the host slot belongs to the planner again (reclaim() hands it back
  // as soon as the copy has run, possibly before this returns): after submit_copy nothing here
  // reads or writes `slot`. A batch that fails gives its slots back here, and only here: its
  // ready entry carries the error and owns no slot.
  void finish(std::size_t s, std::stop_token st) {
    host_slot& slot = slots_[s];
    ready_entry e;
    e.host = s;
    e.sequence = slot.sequence;
    e.at = slot.at;
    e.last_in_epoch = slot.last_in_epoch;
    if (!slot.error) {
      std::lock_guard lock(slot.failure_mutex);
      e.skipped = apply_error_policy(slot, cfg_.layout, cfg_.policy);
    }
    for (const auto& r : e.skipped) telemetry_.skipped(r);
    e.records = slot.records;
    e.data_bytes = slot.data_bytes;
    bool copy_queued = false;
    e.error = slot.error;
    if (!e.error) {
      try {
        if (engine_) {
          auto d = free_device_.pop(st);
          if (!d) return;
          e.device = *d;
          e.has_device = true;
          submit(slot, *d, copy_queued);
        } else if (cfg_.hook) {
          cfg_.hook(host_view(s), nullptr);
        }
      } catch (...) {
        e.error = std::current_exception();
      }
    }
    if (e.error) {
      e.records = e.data_bytes = 0;
      if (e.has_device) {
        if (copy_queued) engine_->abandon(e.device, stream_of(e.sequence));
        free_device_.try_push(e.device);
        e.has_device = false;
      }
      if (!copy_queued) free_host_.try_push(s);  // else reclaim() returns it after the copy
    }
    {
      std::lock_guard lock(ready_mutex_);
      ready_.emplace(e.sequence, std::move(e));
    }
    ready_cv_.notify_all();
  }

  std::size_t stream_of(std::uint64_t sequence) const noexcept {
    return static_cast<std::size_t>(sequence % cfg_.streams);
  }

  // One H2D copy of metadata + records, the hook's work, then the ready event, all on one stream.
  // Everything needed after the copy is queued is read from the slot before it (see finish()).
  void submit(const host_slot& slot, std::size_t d, bool& copy_queued) {
    const std::byte* base = slot.buffer.data();
    const std::size_t stream = stream_of(slot.sequence);
    const std::size_t records = slot.records, data_bytes = slot.data_bytes;
    std::memcpy(mirrors_[d].data(), base, cfg_.layout.data_offset());  // host metadata copy
    const std::size_t bytes = cfg_.layout.data_offset() + data_bytes;
    engine_->submit_copy(d, stream, base, bytes, slot_index(slot));
    copy_queued = true;
    if (cfg_.hook) engine_->run_hook(stream, cfg_.hook, device_view(d, records, data_bytes));
    engine_->mark_ready(d, stream);
  }

  std::size_t slot_index(const host_slot& slot) const noexcept {
    return static_cast<std::size_t>(&slot - slots_.data());
  }

  // The view of a batch laid out as cfg_.layout at `base` (host or device memory).
  batch_view view_at(std::byte* base, std::byte* output, std::size_t records,
                     std::size_t data_bytes, bool on_device) const {
    batch_view v;
    v.data = slot_layout::data(base, cfg_.layout);
    v.data_bytes = data_bytes;
    v.offsets = slot_layout::offsets(base, cfg_.layout);
    v.labels = cfg_.labels ? slot_layout::labels(base, cfg_.layout) : nullptr;
    v.indices = slot_layout::indices(base, cfg_.layout);
    v.records = records;
    v.record_bytes = cfg_.record_bytes;
    v.output = cfg_.output_bytes ? output : nullptr;
    v.output_bytes = cfg_.output_bytes;
    v.on_device = on_device;
    return v;
  }
  batch_view device_view(std::size_t d, std::size_t records, std::size_t data_bytes) const {
    return view_at(engine_->device_slot(d), engine_->output_slot(d), records, data_bytes, true);
  }
  batch_view host_view(std::size_t s) {
    return view_at(slots_[s].buffer.data(), outputs_.empty() ? nullptr : outputs_[s].data(),
                   slots_[s].records, slots_[s].data_bytes, false);
  }

  batch make_batch(ready_entry&& e) {
    detail::batch_fields f;
    f.epoch = e.at.epoch;
    f.number = e.at.batch;
    f.sequence = e.sequence;
    f.last_in_epoch = e.last_in_epoch;
    f.records = e.records;
    f.record_bytes = cfg_.record_bytes;
    f.data_bytes = e.data_bytes;
    f.skipped = std::move(e.skipped);
    std::size_t ticket;
    if (e.has_device) {
      try {
        engine_->consumer_acquire(e.device, cfg_.consumer);
      } catch (...) {
        {
          std::lock_guard lock(ready_mutex_);
          --held_;
        }
        release_slots(true, e.device, e.host, cfg_.consumer);
        throw;
      }
      const batch_view v = device_view(e.device, e.records, e.data_bytes);
      f.data = v.data;
      f.offsets = v.offsets;
      f.labels = v.labels;
      f.indices = v.indices;
      f.output = v.output;
      f.output_bytes = v.output_bytes;
      const batch_view m = view_at(reinterpret_cast<std::byte*>(mirrors_[e.device].data()),
                                   nullptr, e.records, e.data_bytes, false);
      f.host_offsets = m.offsets;
      f.host_labels = m.labels;
      f.host_indices = m.indices;
      f.on_device = true;
      f.device = device_;
      ticket = e.device;
    } else {
      const batch_view v = host_view(e.host);
      f.data = v.data;
      f.offsets = f.host_offsets = v.offsets;
      f.labels = f.host_labels = v.labels;
      f.indices = f.host_indices = v.indices;
      f.output = v.output;
      f.output_bytes = v.output_bytes;
      ticket = e.host;
    }
    {
      std::lock_guard lock(ready_mutex_);
      held_since_[ticket % held_since_.size()] = held_mark{steady::now(), f.sequence};
    }
    return batch(this->shared_from_this(), ticket, cfg_.consumer, std::move(f));
  }

  const Source& source_;
  sampler sampler_;
  pipeline_config cfg_;
  std::string target_name_;
  int device_;
  std::unique_ptr<transfer_engine> engine_;
  telemetry telemetry_;
  std::vector<host_slot> slots_;
  std::vector<resource_buffer> outputs_;                 // host target transform outputs
  std::vector<std::vector<std::uint64_t>> mirrors_;     // device target: host metadata per slot
  std::vector<std::size_t> reclaimed_;  // planner only: tokens engine_->reclaim() returned
  std::vector<chunk_task> tasks_;       // planner only: a batch's chunks before hand-off
  struct held_mark {
    steady::time_point at;
    std::uint64_t sequence = 0;
  };
  std::vector<held_mark> held_since_ =
      std::vector<held_mark>(std::max(host_slot_count(), cfg_.prefetch + cfg_.max_held));
  std::vector<std::unique_ptr<trace_track>> tracks_;  // workers, planner, consumer
  bounded_queue<int> credits_;
  bounded_queue<std::size_t> free_host_;
  bounded_queue<std::size_t> free_device_;
  bounded_queue<chunk_task> work_;

  mutable std::mutex ready_mutex_;
  std::condition_variable ready_cv_;
  std::map<std::uint64_t, ready_entry> ready_;
  std::uint64_t next_sequence_ = 0;
  std::optional<std::uint64_t> end_sequence_;
  std::optional<sampler_state> delivered_state_;
  std::size_t held_ = 0;
  bool stopped_ = false;
  std::jthread planner_;
  std::vector<std::jthread> workers_;
};

}  // namespace gpufeed::detail
