// gpufeed-bench: the naive loader users replace, on the same records as gpufeed.
//
// All on one thread, per batch: for each record (shuffled order) open its file, read it into a
// pageable batch buffer, close it, and on the device target cudaMemcpy it (pageable, so
// synchronous and staged by the driver) into the device batch; then the model on the batch, on
// the legacy default stream, which the next batch's first copy waits for. So a step costs
// L_naive + C: nothing overlaps.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <numeric>
#include <random>
#include <string>
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

// compute_ms: the model's time per batch (0 = load only). verify: check the first batch's bytes.
inline result run_naive(const file_set& files, const params& p, double compute_ms, bool verify) {
  const std::size_t rec = files.record_bytes;
  const std::size_t batch = p.batch_records(rec, files.files);
  std::vector<std::uint64_t> order(files.files);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(p.seed));
  std::vector<std::byte> host(batch * rec);
  std::byte* dev = p.device ? p.device->scratch(batch * rec) : nullptr;
  model m(p.device);
  const std::string dir = files.dir.string() + "/";
  std::string path(dir.size() + 32, '\0');
  std::uint64_t at = 0;
  double load_seconds = 0;

  // The first copy of a batch would wait for the previous model anyway (legacy stream); waiting
  // for it explicitly first lets the loop time the loading alone.
  auto one_batch = [&] {
    m.finish(nullptr);
    const auto l0 = clock_type::now();
    for (std::size_t k = 0; k < batch; ++k) {
      const std::uint64_t i = order[at++ % order.size()];
      std::snprintf(path.data(), path.size(), "%s%010llu.rec", dir.c_str(),
                    static_cast<unsigned long long>(i));
      read_whole_file(path.c_str(), host.data() + k * rec, rec);
      if (dev) p.device->copy_pageable(dev + k * rec, host.data() + k * rec, rec);
    }
    load_seconds += seconds_since(l0);
    m.run(dev ? dev : host.data(), batch * rec, compute_ms, nullptr);
  };

  for (std::uint64_t w = 0; w < std::max<std::uint64_t>(1, p.warmup_batches); ++w) {
    one_batch();
    if (w == 0 && verify) {
      std::vector<std::byte> check(batch * rec);
      if (dev)
        p.device->copy_to_host(check.data(), dev, check.size());
      else
        check = host;
      for (std::size_t k = 0; k < batch; ++k)
        if (!record_matches(order[k], std::span<const std::byte>(check).subspan(k * rec, rec)))
          fail("naive loader: record " + std::to_string(order[k]) + " differs from its data");
    }
  }
  m.finish(nullptr);

  result r;
  load_seconds = 0;
  const auto t0 = clock_type::now();
  while (r.batches < p.min_batches || seconds_since(t0) < p.case_seconds) {
    one_batch();
    ++r.batches;
  }
  m.finish(nullptr);
  r.seconds = seconds_since(t0);
  r.loader = "naive";
  r.target = p.target();
  r.dataset = "files/" + size_name(rec);
  r.format = "files";
  r.order = "shuffled";
  r.record_bytes = rec;
  r.workers = 1;
  r.batch_size = batch;
  r.records = r.batches * batch;
  r.bytes = r.records * rec;
  r.stall_fraction = r.seconds > 0 ? std::min(1.0, load_seconds / r.seconds) : 0.0;  // loading = model idle
  r.case_name = "naive/" + size_name(rec) + (compute_ms > 0 ? "/C=" + fmt("%.3fms", compute_ms) : "");
  r.extra["compute_ms"] = compute_ms;
  r.extra["load_ms"] = r.batches ? load_seconds * 1e3 / static_cast<double>(r.batches) : 0.0;
  r.extra["files"] = files.files;
  return r;
}

}  // namespace bench
