// gpufeed-bench: the naive loaders users replace, on the same records as gpufeed.
//
// Every variant reads one file per record (shuffled order: open, read into a pageable buffer,
// close) and, on the device target, copies with a synchronous cudaMemcpy from pageable memory
// (staged by the driver) into device memory, then runs the model on the batch on the legacy
// default stream, which the next copy waits for. So a step costs L_naive + C: nothing overlaps.
//   per_record  one thread, one cudaMemcpy per record (the worst copy pattern);
//   per_batch   the loop users write next: read the whole batch, then one cudaMemcpy per batch;
//               with `threads` > 1, that many threads each doing so on their own batches (taken
//               in turn from one shuffled order), each into its own device buffer.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <latch>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_data.hpp"
#include "bench_result.hpp"

namespace bench {

inline void read_whole_file(const char* path, std::byte* dst, std::size_t bytes) {
  const int fd = ::open(path, O_RDONLY);
  if (fd < 0) fail(std::string("cannot open ") + path);
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::read(fd, dst + got, bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got != bytes) fail(std::string("short read of ") + path);
}

enum class naive_copy { per_record, per_batch };

struct naive_spec {
  naive_copy copy = naive_copy::per_record;
  unsigned threads = 1;   // per_batch only
  double compute_ms = 0;  // the model's time per batch (0 = load only)
};

inline std::string naive_case_name(const file_set& files, const naive_spec& s) {
  std::string n = "naive/" + size_name(files.record_bytes);
  if (s.copy == naive_copy::per_batch) n += "/batch/t" + std::to_string(s.threads);
  return n;
}

// Runs one naive variant; every thread's first batch is checked byte for byte against the
// generator (on the device target, after copying it back from the device).
inline result run_naive(const file_set& files, const params& p, const naive_spec& spec) {
  const std::size_t rec = files.record_bytes;
  const std::size_t batch = p.batch_records(rec, files.files);
  const unsigned threads = spec.copy == naive_copy::per_batch ? std::max(1u, spec.threads) : 1u;
  std::vector<std::uint64_t> order(files.files);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(p.seed));
  std::byte* dev_all = p.device ? p.device->scratch(threads * batch * rec) : nullptr;
  const std::string dir = files.dir.string() + "/";

  std::atomic<std::uint64_t> next_batch{0}, timed_batches{0};
  std::atomic<bool> stop{false};
  std::vector<double> load_seconds(threads, 0.0);
  std::vector<std::string> errors(threads);
  std::latch warmed(threads + 1), go(1);

  auto worker = [&](unsigned t) {
    bool counted = false;
    try {
      std::vector<std::byte> host(batch * rec);
      std::vector<std::uint64_t> ids(batch);
      std::byte* dev = dev_all ? dev_all + std::size_t{t} * batch * rec : nullptr;
      model m(p.device);
      std::string path(dir.size() + 32, '\0');
      // The next copy would wait for the previous model anyway (legacy stream); waiting for it
      // explicitly first lets the loop time the loading alone.
      auto one_batch = [&] {
        m.finish(nullptr);
        const auto l0 = clock_type::now();
        const std::uint64_t b = next_batch.fetch_add(1);
        for (std::size_t k = 0; k < batch; ++k) {
          ids[k] = order[(b * batch + k) % order.size()];
          std::snprintf(path.data(), path.size(), "%s%010llu.rec", dir.c_str(),
                        static_cast<unsigned long long>(ids[k]));
          read_whole_file(path.c_str(), host.data() + k * rec, rec);
          if (dev && spec.copy == naive_copy::per_record)
            p.device->copy_pageable(dev + k * rec, host.data() + k * rec, rec);
        }
        if (dev && spec.copy == naive_copy::per_batch)
          p.device->copy_pageable(dev, host.data(), batch * rec);
        load_seconds[t] += seconds_since(l0);
        m.run(dev ? dev : host.data(), batch * rec, spec.compute_ms, nullptr);
      };
      for (std::uint64_t w = 0; w < std::max<std::uint64_t>(1, p.warmup_batches); ++w) {
        one_batch();
        if (w != 0) continue;
        std::vector<std::byte> check(batch * rec);
        if (dev)
          p.device->copy_to_host(check.data(), dev, check.size());
        else
          check = host;
        for (std::size_t k = 0; k < batch; ++k)
          if (!record_matches(ids[k], std::span<const std::byte>(check).subspan(k * rec, rec)))
            fail("naive loader: record " + std::to_string(ids[k]) + " differs from its data");
      }
      m.finish(nullptr);
      load_seconds[t] = 0;
      warmed.count_down();
      counted = true;
      go.wait();
      while (!stop.load()) {
        one_batch();
        timed_batches.fetch_add(1);
      }
      m.finish(nullptr);
    } catch (const std::exception& e) {
      errors[t] = e.what();
      stop = true;
    }
    if (!counted) warmed.count_down();
  };

  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker, t);
  warmed.arrive_and_wait();
  const auto t0 = clock_type::now();
  go.count_down();
  while (!stop.load() && (timed_batches.load() < p.min_batches || seconds_since(t0) < p.case_seconds))
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  stop = true;
  for (auto& th : pool) th.join();
  result r;
  r.seconds = seconds_since(t0);
  for (const auto& e : errors)
    if (!e.empty()) fail(e);
  r.batches = timed_batches.load();
  r.loader = "naive";
  r.target = p.target();
  r.dataset = "files/" + size_name(rec);
  r.format = "files";
  r.order = "shuffled";
  r.record_bytes = rec;
  r.workers = threads;
  r.batch_size = batch;
  r.records = r.batches * batch;
  r.bytes = r.records * rec;
  double load = 0;
  for (double s : load_seconds) load += s;
  // Loading is time the model waits for (per thread, averaged over the threads).
  r.stall_fraction = r.seconds > 0 ? std::min(1.0, load / threads / r.seconds) : 0.0;
  r.case_name = naive_case_name(files, spec) +
                (spec.compute_ms > 0 ? "/C=" + fmt("%.3fms", spec.compute_ms) : "");
  r.extra["variant"] = spec.copy == naive_copy::per_record ? "per_record" : "per_batch";
  r.extra["compute_ms"] = spec.compute_ms;
  // Each thread's load time per batch, measured in this run (the overlap rows' L_naive).
  r.extra["load_ms"] = r.batches ? load * 1e3 / static_cast<double>(r.batches) : 0.0;
  r.extra["files"] = files.files;
  return r;
}

}  // namespace bench
