// gpufeed::detail — the loader's machinery, assembled: the shared state (state.hpp), the planner
// and workers (producer.hpp) on a thread group, and the consumer's side (delivery.hpp): next(),
// release, stats and the trace export.
//
//   consumer  next() waits for the next batch in sequence order; the engine makes the consumer's
//             stream wait on the batch (on a device, its ready event: no host synchronisation).
//             Releasing tells the engine (a device records the consumed event) and returns the
//             target slot.
#pragma once

#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <ostream>
#include <stop_token>
#include <string>
#include <vector>

#include "gpufeed/batch.hpp"
#include "gpufeed/decode_stats.hpp"
#include "gpufeed/remote_stats.hpp"
#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/detail/loader/delivery.hpp"
#include "gpufeed/detail/loader/device_stage.hpp"
#include "gpufeed/detail/loader/error_policy.hpp"
#include "gpufeed/detail/loader/read_stage.hpp"
#include "gpufeed/detail/loader/producer.hpp"
#include "gpufeed/detail/loader/state.hpp"
#include "gpufeed/detail/thread_group.hpp"
#include "gpufeed/source.hpp"
#include "gpufeed/stats.hpp"

namespace gpufeed::detail::loading {

template <source Source>
class pipeline final : public batch_owner, public std::enable_shared_from_this<pipeline<Source>> {
  struct key {};

 public:
  // Builds the engine and every slot, then starts the threads (they never see a half-built
  // pipeline).
  static std::shared_ptr<pipeline> make(const Source& src, pipeline_setup setup) {
    std::unique_ptr<transfer_engine> engine = setup.config.target.make_engine();
    // Decoding on the device: the workers decode nothing ahead on the host; block_shuffled's
    // batches stage their share of the next window for the device instead (read_ahead.hpp).
    std::optional<device_decode_plan> decode = plan_device_decode(src, setup, *engine);
    // A batch then waits for the in-order decode on the device between its staging and its
    // hand-off: an automatic prefetch deepens so the workers stage on meanwhile (the cache is
    // planned again for the batches in flight).
    if (decode && setup.automatic_prefetch && setup.config.prefetch < device_decode_prefetch) {
      setup.config.prefetch = device_decode_prefetch;
      decode = plan_device_decode(src, setup, *engine);
    }
    const slot_counts n = slot_counts::of(setup.config, *engine);
    read_plan plan;  // before any worker reads: the source sizes what it keeps for these reads
    plan.lookahead_records =
        static_cast<std::uint64_t>(setup.config.prefetch) * setup.config.batch_size;
    plan.workers = setup.config.workers;
    // block_shuffled: tumbling windows of the order's units, each of which may hold several
    // decode units, so the window is told in records (at most the largest unit's each).
    if (setup.config.order == sample_order::block_shuffled)
      plan.window_records = static_cast<std::uint64_t>(setup.config.shuffle_window) *
                            setup.order.units().max_records();
    plan.decode_ahead = !decode && window_read_ahead<Source>::decodes_ahead(setup);
    plan.random_records = setup.config.order == sample_order::shuffled;
    plan_reads(src, plan);
    auto p = std::make_shared<pipeline>(key{}, src, std::move(setup), std::move(engine), n,
                                        decode);
    p->start();
    return p;
  }

  pipeline(key, const Source& src, pipeline_setup&& setup, std::unique_ptr<transfer_engine> e,
           slot_counts n, const std::optional<device_decode_plan>& decode)
      : state_(std::move(setup), std::move(e), n, decode), producer_(src, state_), source_(src) {
    if constexpr (decode_stats_source<Source>) decode_start_ = src.decode_stats();
    if constexpr (remote_stats_source<Source>) remote_start_ = src.remote_stats();
  }

  ~pipeline() override {
    shutdown();
    state_.engine->drain();  // copies queued from staging slots must finish before they are freed
  }

  // Stops and joins every thread. Batches the consumer still holds stay valid until released.
  void shutdown() noexcept {
    threads_.request_stop();
    state_.close();
    threads_.join();
  }

  // The next batch in sequence, or nullopt when the configured epochs are done.
  std::optional<batch> next() {
    state_.meter.consumer_started();
    const auto t0 = steady::now();
    std::optional<ready_queue::taken> t = state_.ready.take();
    if (!t) return std::nullopt;
    state_.slots.return_credit();  // the planner may run one batch further ahead
    ready_entry& e = t->entry;
    const std::uint64_t waited = since_ns(t0);
    state_.meter.delivered(e.meta.records, e.meta.data_bytes, waited, t->ready_now);
    state_.timeline.add_ending_now(state_.timeline.consumer(), "wait for batch", waited,
                                   e.meta.sequence);
    // A failed batch holds no slot: finish() returned its slots when it failed.
    if (e.error) std::rethrow_exception(e.error);
    if (state_.device && state_.device->slot(e.slot).device_work) check_decoded(e);
    return hand_out(std::move(e));
  }

  // The state to restore to resume right after the last batch next() returned.
  sampler_state state() const {
    const pipeline_setup& p = state_.setup;
    const std::optional<batch_meta> m = state_.ready.last_taken();
    if (!m) return p.start;
    return p.order.advance(sampler_state{p.start.seed, m->epoch, m->position});
  }

  void release_batch(std::size_t ticket, stream_handle consumer) noexcept override {
    const ready_queue::held_mark m = state_.ready.released(ticket);
    const std::uint64_t ns = since_ns(m.at);
    state_.meter.held(ns);
    state_.timeline.add_ending_now(state_.timeline.consumer(), "consume", ns, m.sequence);
    give_back(ticket, consumer);
  }

  loader_stats stats() const {
    const loader_config& c = state_.setup.config;
    const bool on_device = !c.target.is_host();
    loader_stats s;
    state_.meter.snapshot(s);
    if (const engine_probe* p = state_.engine->probe()) s.transfer = p->counters();
    const std::size_t slot_bytes = state_.setup.layout().slot_bytes();
    (on_device ? s.pinned_bytes : s.host_slot_bytes) = state_.staging.size() * slot_bytes;
    s.device_bytes =
        on_device ? state_.counts.target * (slot_bytes + c.transform_output_bytes) : 0;
    s.ready_queue_capacity = c.prefetch;
    s.worker_count = c.workers;
    s.prefetch = c.prefetch;
    s.streams = on_device ? c.streams : 0;
    s.batch_size = c.batch_size;
    s.target = c.target.name();
    s.order = to_string(c.order);
    s.records_per_decode_unit = state_.setup.records_per_decode_unit;
    if (c.order == sample_order::block_shuffled) {
      s.order_units = state_.setup.order.units().size();
      s.shuffle_window = c.shuffle_window;
    }
    s.trace_events_dropped = state_.timeline.dropped();
    if constexpr (decode_stats_source<Source>)
      s.decode = since(source_.decode_stats(), decode_start_);
    if constexpr (remote_stats_source<Source>) {
      const remote_stats r = source_.remote_stats();
      if (r.remote) s.remote = since(r, remote_start_);
    }
    s.numa = state_.numa.stats();
    if (state_.device) {
      device_stage& d = *state_.device;
      s.pinned_bytes += d.pinned_bytes();
      s.device_decode.on = true;
      s.device_decode.device = state_.engine->decoder()->decode_counters();
      s.device_decode.units_staged = d.directory().staged_units();
      s.device_decode.units_staged_ahead = d.directory().staged_ahead();
      s.device_decode.stage_ahead = d.plan().work.ahead;
      s.device_decode.no_room = d.directory().no_room();
      s.device_decode.batches_redone = d.redone();
      s.device_decode.cache_places = d.directory().places();
      s.device_decode.peak_places = d.directory().peak_places();
      s.device_decode.place_bytes = d.directory().place_bytes();
      s.device_bytes += s.device_decode.device.cache_bytes + s.device_decode.device.work_bytes;
    }
    return s;
  }

  // Chrome-trace JSON of everything recorded so far (empty timeline when tracing is off): the
  // tracer's tracks, then one per copy stream from the engine's probe.
  void write_trace(std::ostream& os) {
    std::vector<std::unique_ptr<trace_track>> streams;
    engine_probe* probe = state_.engine->probe();
    if (probe && state_.timeline.on()) {
      for (std::size_t i = 0; i < state_.setup.config.streams; ++i)
        streams.push_back(std::make_unique<trace_track>("stream " + std::to_string(i) + " (H2D)",
                                                        state_.timeline.capacity()));
      for (const auto& c : probe->copy_spans())
        streams[c.stream]->add("H2D copy", c.start_ns, c.end_ns, c.batch_bytes);
    }
    std::vector<const trace_track*> extra;
    for (const auto& t : streams) extra.push_back(t.get());
    const std::int64_t origin = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    state_.meter.start().time_since_epoch()).count();
    state_.timeline.write(os, extra, origin);
  }

 private:
  void start() {
    // Each thread binds itself to the placement's cores before it works (numa_stats counts it).
    threads_.spawn([this](std::stop_token st) {
      state_.numa.bind_thread();
      producer_.plan_loop(st);
    });
    for (std::size_t w = 0; w < state_.setup.config.workers; ++w)
      threads_.spawn([this, w](std::stop_token st) {
        state_.numa.bind_thread();
        producer_.work_loop(st, worker_id(w));
      });
  }

  void give_back(std::size_t d, stream_handle consumer) noexcept {
    state_.engine->release(d, consumer);
    state_.slots.return_target(d);
    state_.slots.staging_may_return();  // in place: the batch's staging slot is reclaimable
  }

  // Device decode: the batch in target slot e.slot is handed out only once its units decoded
  // (statuses waits for that decode if it has not finished); otherwise, or when it gathered
  // from a unit another batch failed to decode, it is read again here, on the host, and the
  // error policy applies to it as on the host path (the records' own errors, named). Throws
  // the batch's error (its slot given back) when the policy fails it.
  void check_decoded(ready_entry& e) {
    unit_decoder* dec = state_.engine->decoder();
    const pipeline_setup& p = state_.setup;
    try {
      if (state_.device->check(e.slot, dec->statuses(e.slot))) return;
      const slot_layout l = p.layout();
      staging_slot host;
      host.buffer = resource_buffer(pageable_resource::instance(), l.slot_bytes());
      std::memcpy(host.buffer.data(), state_.mirrors[e.slot].data(), l.data_offset());
      host.meta = e.meta;
      auto reader = make_reader(source_);
      std::vector<std::size_t> late;
      std::uint64_t failures = 0;
      read_records(reader, host, l, 0, host.meta.records, nullptr, 0, 1, late, failures);
      std::vector<skipped_record> skipped = apply_error_policy(host, l, p.config.on_error);
      if (host.error) std::rethrow_exception(host.error);
      dec->overwrite(e.slot, host.buffer.data(), l.data_offset() + host.meta.data_bytes);
      std::memcpy(state_.mirrors[e.slot].data(), host.buffer.data(), l.data_offset());
      for (const auto& r : skipped) state_.meter.skipped(r);
      e.meta = host.meta;
      e.skipped.insert(e.skipped.end(), skipped.begin(), skipped.end());
    } catch (...) {
      state_.ready.unheld();
      give_back(e.slot, p.config.consumer_stream);
      throw;
    }
  }

  // The consumer's stream waits for the batch; the batch leases target slot e.slot.
  batch hand_out(ready_entry&& e) {
    const pipeline_setup& p = state_.setup;
    const loader_config& c = p.config;
    try {
      state_.engine->acquire(e.slot, c.consumer_stream);
    } catch (...) {
      state_.ready.unheld();
      give_back(e.slot, c.consumer_stream);
      throw;
    }
    const target_slot t = state_.engine->slot(e.slot);
    const slot_layout l = p.layout();
    const batch_view view = view_at(e.meta, l, t.data, t.output, p.labels);
    auto* mirror = reinterpret_cast<std::byte*>(state_.mirrors[e.slot].data());
    const batch_view host = view_at(e.meta, l, mirror, nullptr, p.labels);
    state_.ready.handed_out(e.slot, e.meta.sequence);
    return batch(this->shared_from_this(), e.slot, c.consumer_stream, view, host,
                 c.target.device(), std::move(e.skipped));
  }

  loader_state state_;          // built from the constructor's arguments alone
  producer<Source> producer_;   // keeps a reference to state_
  const Source& source_;
  decode_stats decode_start_;   // the source's decode counters when this loader started
  remote_stats remote_start_;   // its remote counters then
  thread_group threads_;        // last: joined before the members the threads use go away
};

}  // namespace gpufeed::detail::loading
