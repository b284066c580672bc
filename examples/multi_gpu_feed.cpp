// multi_gpu_feed: one process feeding several GPUs, a loader per device, each on its own
// consumer thread, with each loader's slots and workers placed on its GPU's NUMA node
// (loader_config::numa, automatic). On a machine without a GPU the same program runs host-target
// loaders (two at least), each placed on a NUMA node in turn, so the multi-loader path runs in
// CI. Checks that each loader delivers every record exactly once per epoch (and, on the host,
// the right bytes) and prints stats().numa; exits 1 when a check fails, or with
// --require-placement when a loader's placement was not honoured (where sysfs lists NUMA nodes).
//
//   multi_gpu_feed [--loaders N] [--epochs E] [--require-placement]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/detail/numa/topology.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/target_choice.hpp"
#ifdef GPUFEED_HAS_CUDA
#include "gpufeed/cuda/device.hpp"
#endif

namespace {

// 20,000 records of 1-4 KiB; byte j of record i is (i + j) mod 251.
struct demo_source {
  std::uint64_t size() const noexcept { return 20000; }
  std::size_t record_size(std::uint64_t i) const noexcept { return 1024 + (i * 37) % 3072; }
  std::size_t max_record_size() const noexcept { return 4096; }
  void read(std::uint64_t i, std::span<std::byte> dst) const {
    for (std::size_t j = 0; j < record_size(i); ++j)
      dst[j] = static_cast<std::byte>((i + j) % 251);
  }
};

}  // namespace

int main(int argc, char** argv) {
  int loaders = 0, epochs = 2;
  bool require_placement = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--loaders") && i + 1 < argc) loaders = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--epochs") && i + 1 < argc) epochs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--require-placement")) require_placement = true;
  }
  int devices = 0;
#ifdef GPUFEED_HAS_CUDA
  devices = gpufeed::cuda::query().available ? gpufeed::cuda::query().device_count : 0;
#endif
  if (loaders <= 0) loaders = std::max(2, devices);
  const auto topo = gpufeed::detail::numa::read_topology("/");
  const demo_source src;
  std::mutex print;
  int failures = 0;
  std::vector<std::thread> threads;
  for (int k = 0; k < loaders; ++k)
    threads.emplace_back([&, k] {
      try {
        gpufeed::loader_config c;
        c.batch_size = 256;
        c.seed = 100 + static_cast<std::uint64_t>(k);
        c.part = gpufeed::partition{};  // each loader reads the whole dataset for its GPU
        c.epochs = static_cast<std::uint64_t>(epochs);
        c.workers = 2;
        std::string why;
        c.target = gpufeed::device_or_host(devices ? k % devices : 0, &why);
        if (c.target.is_host() && !topo.nodes.empty())  // no device to be near: name a node
          c.numa = gpufeed::numa_setting::on_node(
              topo.nodes[static_cast<std::size_t>(k) % topo.nodes.size()].id);
        gpufeed::loader<demo_source> l(src, c);
        bool ok = true;
        for (int e = 0; e < epochs; ++e) {
          std::vector<int> seen(src.size(), 0);
          for (auto& b : l.epoch()) {
            const auto idx = b.host_indices();
            for (std::size_t r = 0; r < b.size(); ++r) {
              ++seen[idx[r]];
              if (!b.on_device()) {
                const auto rec = b.record(r);
                for (std::size_t j = 0; j < rec.size(); ++j)
                  ok = ok && rec[j] == static_cast<std::byte>((idx[r] + j) % 251);
              }
            }
          }
          ok = ok && std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; });
        }
        const auto s = l.stats();
        const auto& n = s.numa;
        std::lock_guard lock(print);
        std::printf("loader %d on %s: %s; numa %s node %d (%s), slots %llu/%llu pages on node, "
                    "%zu/%zu threads bound, honoured %s\n",
                    k, s.target.c_str(), ok ? "every record once per epoch" : "WRONG DELIVERY",
                    n.mode.c_str(), n.node, n.reason.c_str(),
                    static_cast<unsigned long long>(n.slot_pages_on_node),
                    static_cast<unsigned long long>(n.slot_pages), n.threads_bound, n.threads,
                    n.honoured ? "yes" : "no");
        if (!ok || (require_placement && !topo.nodes.empty() && !n.honoured)) ++failures;
      } catch (const std::exception& e) {
        std::lock_guard lock(print);
        std::printf("loader %d failed: %s\n", k, e.what());
        ++failures;
      }
    });
  for (auto& t : threads) t.join();
  return failures ? 1 : 0;
}
