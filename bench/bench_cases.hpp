// gpufeed-bench: gpufeed's cases — one loader run (load-only or with a model time per batch),
// first-batch latency, and pinned memory over many epochs.
//
// Every run uses loader<Source, loader_options<dynamic, dynamic, dynamic>> with workers,
// prefetch and streams from the sweep, a batch of params::batch_records() records, and the
// model (bench_result.hpp) as the consumer on the consumer's stream. Timing is wall clock on
// the host around the loop of timed batches, ending with a synchronisation of the consumer's
// stream, after untimed warm-up batches; stall_fraction comes from the loader's stats over the
// timed batches only. Every case checks its first batch against the generator, byte for byte.
#pragma once

#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_data.hpp"
#include "bench_result.hpp"
#include "bench_trace.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/memory.hpp"

namespace bench {

using dynamic_options =
    gpufeed::loader_options<gpufeed::dynamic, gpufeed::dynamic, gpufeed::dynamic>;

struct sweep_point {
  std::size_t workers = 1, prefetch = 4, streams = 2;
};

struct run_spec {
  sweep_point at;
  gpufeed::sample_order order = gpufeed::sample_order::shuffled;
  double compute_ms = 0;      // model time per batch; 0 = load only
  std::size_t chunk_records = 0;  // loader_config::chunk_records (records per worker task); 0 = auto
  std::string trace_path;     // write the loader's Chrome trace here (empty: no trace)
  std::string case_name;      // default: gpufeed/<dataset>/w../p../s..
};

// A source of n records in memory, for the 1 M record first-batch measurement when no generated
// file has that many: read(i) copies record i % 4096 of a pool of generated records (a memcpy,
// like a read from the page cache), so n can be large without holding n records.
class synthetic_source {
 public:
  synthetic_source(std::uint64_t n, std::size_t record_bytes)
      : n_(n), rec_(record_bytes), pool_(pool_records * record_bytes) {
    for (std::size_t k = 0; k < pool_records; ++k)
      fill_record(k, std::span<std::byte>(pool_).subspan(k * rec_, rec_));
  }
  [[nodiscard]] std::uint64_t size() const noexcept { return n_; }
  [[nodiscard]] std::size_t record_size(std::uint64_t) const noexcept { return rec_; }
  [[nodiscard]] std::size_t fixed_record_size() const noexcept { return rec_; }
  void read(std::uint64_t i, std::span<std::byte> dst) const {
    if (dst.size() < rec_ || i >= n_) fail("synthetic_source: bad read");
    std::memcpy(dst.data(), pool_.data() + generator_index(i) * rec_, rec_);
  }
  // Record i holds fill_record(generator_index(i)).
  static std::uint64_t generator_index(std::uint64_t i) noexcept { return i % pool_records; }

 private:
  static constexpr std::size_t pool_records = 4096;
  std::uint64_t n_;
  std::size_t rec_;
  std::vector<std::byte> pool_;
};

inline gpufeed::loader_config make_config(const params& p, std::size_t batch, const sweep_point& at,
                                          gpufeed::sample_order order) {
  gpufeed::loader_config c;
  c.batch_size = batch;
  c.seed = p.seed;
  c.order = order;
  c.part = gpufeed::partition{};  // one process, whatever the launcher's environment says
  c.workers = at.workers;
  c.prefetch = at.prefetch;
  c.streams = at.streams;
  c.target = p.device ? p.device->target() : gpufeed::target::host();
  c.consumer_stream = p.device ? p.device->stream() : nullptr;
  return c;
}

// Every record of the batch equals the generator's bytes for its index (mapped by `gen`: the
// synthetic source repeats a pool of records).
inline void verify_batch(const gpufeed::batch& b, const params& p, const std::string& what,
                         std::uint64_t (*gen)(std::uint64_t) = nullptr) {
  std::vector<std::byte> host(b.data().size());
  if (b.on_device()) {
    p.device->synchronize(p.device->stream());
    p.device->copy_to_host(host.data(), b.data().data(), host.size());
  } else {
    std::copy(b.data().begin(), b.data().end(), host.begin());
  }
  const auto off = b.host_offsets();
  for (std::size_t k = 0; k < b.size(); ++k) {
    const std::span<const std::byte> rec(host.data() + off[k], off[k + 1] - off[k]);
    const std::uint64_t i = b.host_indices()[k];
    if (!record_matches(gen ? gen(i) : i, rec))
      fail(what + ": record " + std::to_string(b.host_indices()[k]) +
           " delivered with the wrong bytes");
  }
}

template <class Source>
result run_gpufeed(const Source& src, const dataset& d, const params& p, const run_spec& spec) {
  const std::size_t batch = p.batch_records(d.record_bytes, src.size());
  gpufeed::loader_config c = make_config(p, batch, spec.at, spec.order);
  if (!spec.trace_path.empty()) c.trace_events = 1u << 16;
  c.chunk_records = spec.chunk_records;
  model m(p.device);
  if (!spec.trace_path.empty()) m.trace(4096);
  gpufeed::loader<Source, dynamic_options> l(src, c);
  const auto stream = c.consumer_stream;

  // Every case checks its first batch, byte for byte, against the generator (untimed).
  for (std::uint64_t w = 0; w < std::max<std::uint64_t>(1, p.warmup_batches); ++w) {
    auto b = l.next();
    if (w == 0) verify_batch(*b, p, d.name());
    m.run(b->data().data(), b->data().size(), spec.compute_ms, stream);
  }
  m.finish(stream);
  const gpufeed::loader_stats s0 = l.stats();
  result r;
  const auto t0 = clock_type::now();
  while (r.batches < p.min_batches || seconds_since(t0) < p.case_seconds) {
    auto b = l.next();
    m.run(b->data().data(), b->data().size(), spec.compute_ms, stream);
    ++r.batches;
    r.records += b->size();
    r.bytes += b->data().size();
  }
  m.finish(stream);
  r.seconds = seconds_since(t0);
  const gpufeed::loader_stats s1 = l.stats();
  if (!spec.trace_path.empty()) {
    std::ostringstream trace;
    l.write_trace(trace);
    std::ofstream out(spec.trace_path);
    out << with_model_track(trace.str(), m, p.device != nullptr);
    if (!out.flush()) fail("cannot write " + spec.trace_path);
  }

  const double wait = s1.consumer_wait_seconds - s0.consumer_wait_seconds;
  const double hold = s1.consumer_hold_seconds - s0.consumer_hold_seconds;
  r.stall_fraction = wait + hold > 0 ? wait / (wait + hold) : 0.0;
  r.extra["consumer_wait_ms"] = wait * 1e3 / static_cast<double>(r.batches);  // per batch
  r.extra["consumer_hold_ms"] = hold * 1e3 / static_cast<double>(r.batches);
  r.loader = "gpufeed";
  r.target = p.target();
  r.dataset = d.name();
  r.format = d.label();
  r.order = gpufeed::to_string(spec.order);
  r.record_bytes = d.record_bytes;
  r.workers = s1.worker_count;
  r.prefetch = s1.prefetch;
  r.streams = s1.streams;
  r.batch_size = batch;
  r.pinned_bytes = s1.pinned_bytes;
  r.case_name = !spec.case_name.empty()
                    ? spec.case_name
                    : "gpufeed/" + d.name() +
                          (r.order == "sequential"       ? "/seq"
                           : r.order == "block_shuffled" ? "/block"
                                                         : "") +
                          "/w" +
                          std::to_string(r.workers) + "/p" + std::to_string(r.prefetch) +
                          (p.device ? "/s" + std::to_string(r.streams) : "");
  r.extra["host_slot_bytes"] = s1.host_slot_bytes;
  r.extra["device_bytes"] = s1.device_bytes;
  r.extra["compute_ms"] = spec.compute_ms;
  r.extra["chunk_records"] = spec.chunk_records;
  double read_s = 0, read_cpu = 0;
  for (std::size_t w = 0; w < s1.workers.size() && w < s0.workers.size(); ++w) {
    read_s += s1.workers[w].read_seconds - s0.workers[w].read_seconds;
    read_cpu += s1.workers[w].read_cpu_seconds - s0.workers[w].read_cpu_seconds;
  }
  r.extra["worker_read_seconds"] = read_s;
  r.extra["worker_read_cpu_seconds"] = read_cpu;
  if (s1.transfer.timed_copies > s0.transfer.timed_copies) {
    const double cs = s1.transfer.copy_seconds - s0.transfer.copy_seconds;
    const auto cb = static_cast<double>(s1.transfer.bytes - s0.transfer.bytes);
    r.extra["h2d_copy_gb_per_s"] = cs > 0 ? cb / cs / 1e9 : 0.0;
  }
  if (!spec.trace_path.empty()) r.extra["trace"] = spec.trace_path;
  return r;
}

// Time from constructing a loader over `src` (already open) to its first next() returning.
template <class Source>
result first_batch(const Source& src, const std::string& source_name, std::size_t record_bytes,
                   const params& p, const sweep_point& at) {
  const std::size_t batch = p.batch_records(record_bytes, src.size());
  const gpufeed::loader_config c = make_config(p, batch, at, gpufeed::sample_order::shuffled);
  model m(p.device);
  const auto t0 = clock_type::now();
  gpufeed::loader<Source, dynamic_options> l(src, c);
  const double construct = seconds_since(t0);
  auto b = l.next();
  const double first = seconds_since(t0);
  m.run(b->data().data(), b->data().size(), 0, c.consumer_stream);
  m.finish(c.consumer_stream);
  if constexpr (requires { Source::generator_index(0); })  // after the clock stopped
    verify_batch(*b, p, source_name, &Source::generator_index);
  else
    verify_batch(*b, p, source_name);
  result r;
  r.case_name = "first_batch/" + std::to_string(src.size()) + "x" + size_name(record_bytes);
  r.loader = "gpufeed";
  r.target = p.target();
  r.dataset = source_name;
  r.format = source_name.substr(0, source_name.find('/'));
  r.order = "shuffled";
  r.record_bytes = record_bytes;
  r.workers = at.workers;
  r.prefetch = at.prefetch;
  r.streams = p.device ? at.streams : 0;
  r.batch_size = batch;
  r.batches = 1;
  r.records = b->size();
  r.bytes = b->data().size();
  r.seconds = first;
  r.stall_fraction = 1;
  r.pinned_bytes = l.stats().pinned_bytes;
  r.extra["source_records"] = src.size();
  r.extra["construct_ms"] = construct * 1e3;
  r.extra["first_batch_ms"] = first * 1e3;
  r.note = "construct " + fmt("%.1f ms", construct * 1e3) + ", first batch " +
           fmt("%.1f ms", first * 1e3);
  return r;
}

// Runs `epochs` epochs and records, after each, the staging bytes in use (a counting_resource
// over pinned memory on the device target, pageable on the host) and the loader's own figure.
template <class Source>
result pinned_over_epochs(const Source& src, const dataset& d, const params& p,
                          const sweep_point& at, std::uint64_t epochs) {
  gpufeed::counting_resource counter(p.device ? p.device->pinned()
                                              : gpufeed::pageable_resource::instance());
  const std::size_t batch = p.batch_records(d.record_bytes, src.size());
  gpufeed::loader_config c = make_config(p, batch, at, gpufeed::sample_order::shuffled);
  c.staging_memory = &counter;
  c.epochs = epochs;
  model m(p.device);
  result r;
  const auto t0 = clock_type::now();
  gpufeed::loader<Source, dynamic_options> l(src, c);
  const std::size_t start_bytes = counter.bytes_in_use();
  const std::size_t start_allocs = counter.allocations();
  std::vector<std::size_t> per_epoch, reported;
  while (auto b = l.next()) {
    if (r.batches == 0) verify_batch(*b, p, d.name());
    m.run(b->data().data(), b->data().size(), 0, c.consumer_stream);
    ++r.batches;
    r.records += b->size();
    r.bytes += b->data().size();
    if (b->last_in_epoch()) {
      per_epoch.push_back(counter.bytes_in_use());
      const auto s = l.stats();
      reported.push_back(p.device ? s.pinned_bytes : s.host_slot_bytes);
    }
  }
  m.finish(c.consumer_stream);
  r.seconds = seconds_since(t0);
  bool constant = counter.allocations() == start_allocs && counter.peak_bytes() == start_bytes &&
                  per_epoch.size() == epochs;
  for (std::size_t k = 0; k < per_epoch.size(); ++k)
    constant = constant && per_epoch[k] == start_bytes && reported[k] == start_bytes;
  r.case_name = "pinned_epochs/" + d.name() + "/" + std::to_string(epochs);
  r.loader = "gpufeed";
  r.target = p.target();
  r.dataset = d.name();
  r.format = d.label();
  r.order = "shuffled";
  r.record_bytes = d.record_bytes;
  r.workers = at.workers;
  r.prefetch = at.prefetch;
  r.streams = p.device ? at.streams : 0;
  r.batch_size = batch;
  r.pinned_bytes = p.device ? start_bytes : 0;
  r.extra["staging_bytes_per_epoch"] = per_epoch;
  r.extra["staging_bytes_reported"] = reported;
  r.extra["staging_allocations"] = counter.allocations();
  r.extra["staging_peak_bytes"] = counter.peak_bytes();
  r.extra["epochs"] = epochs;
  r.extra["constant"] = constant;
  r.note = std::string(p.device ? "pinned " : "staging (pageable) ") +
           (constant ? "constant" : "NOT constant") + " over " + std::to_string(epochs) +
           " epochs (" + fmt("%.1f MiB", static_cast<double>(start_bytes) / (1u << 20)) + ")";
  return r;
}

}  // namespace bench
