// telemetry_overhead: what the loader's always-on counters cost per chunk of records.
//
// A worker does exactly this around each chunk it reads (detail/loader/pipeline.hpp work_loop):
// two steady_clock reads and five relaxed atomic adds on its own cache line (CPU and run-queue
// times come from schedstat when stats are taken, not per chunk). This program times that sequence alone and prints it beside the time a chunk of
// 16 x 16 KiB records takes to read at a given per-worker rate, so the overhead is a figure, not
// a guess. Usage: telemetry_overhead [GB/s per worker, default 3.7 (H200, 14 workers)]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "gpufeed/detail/loader/telemetry.hpp"

int main(int argc, char** argv) {
  using namespace gpufeed::detail;
  using namespace gpufeed::detail::loading;
  const double worker_gbps = argc > 1 ? std::atof(argv[1]) : 3.7;
  constexpr int iterations = 1'000'000;
  worker_counters c;
  const auto t0 = steady::now();
  for (int i = 0; i < iterations; ++i) {
    const auto s = steady::now();
    const std::uint64_t wall = since_ns(s);
    c.read_ns.fetch_add(wall, std::memory_order_relaxed);
    c.idle_ns.fetch_add(0, std::memory_order_relaxed);
    c.records.fetch_add(16, std::memory_order_relaxed);
    c.bytes.fetch_add(16 * 16384, std::memory_order_relaxed);
    c.chunks.fetch_add(1, std::memory_order_relaxed);
  }
  const double per_chunk_ns = static_cast<double>(since_ns(t0)) / iterations;
  const double chunk_ns = 16.0 * 16384 / worker_gbps;  // bytes / (GB/s) = ns
  std::printf("telemetry per chunk: %.0f ns; a chunk of 16 x 16 KiB at %.1f GB/s per worker takes "
              "%.0f ns: overhead %.2f %%\n",
              per_chunk_ns, worker_gbps, chunk_ns, 100 * per_chunk_ns / chunk_ns);
  return c.chunks.load() == iterations ? 0 : 1;
}
