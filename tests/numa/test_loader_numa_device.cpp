// GPU: two device-target loaders in one process (on devices 0 and 1, or both on device 0 with one
// GPU), consumed at once from two threads: each delivers every record once per epoch, and its
// pinned slots and threads are on the GPU's NUMA node (sysfs by the GPU's PCI bus id), as
// stats().numa reports and move_pages checked. Exits 77 (skipped) without a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <future>
#include <numeric>
#include <vector>

#include "gpufeed/cuda/device_target.hpp"
#include "gpufeed/detail/numa/topology.hpp"
#include "gpufeed/loader.hpp"
#include "memory_source.hpp"

using namespace gpufeed;
using test::memory_source;
namespace numa = gpufeed::detail::numa;

namespace {
struct outcome {
  std::vector<std::uint64_t> seen;
  loader_stats stats;
};

outcome feed(const memory_source& src, int device) {
  loader_config c;
  c.batch_size = 64;
  c.part = partition{};
  c.epochs = 1;
  c.seed = 5 + static_cast<std::uint64_t>(device);
  c.target = cuda::device(device);
  loader<memory_source, loader_options<3, 3, 2>> l(src, c);
  outcome o;
  for (auto& b : l.epoch()) {
    const auto idx = b.host_indices();
    o.seen.insert(o.seen.end(), idx.begin(), idx.end());
  }
  o.stats = l.stats();
  return o;
}
}  // namespace

TEST_CASE("two device loaders in one process: every record once, slots and workers on the GPU's node") {
  const int devices = cuda::query().device_count;
  const int d1 = devices > 1 ? 1 : 0;
  memory_source src(4000, 8192);
  auto a = std::async(std::launch::async, [&] { return feed(src, 0); });
  auto b = std::async(std::launch::async, [&] { return feed(src, d1); });
  const outcome oa = a.get(), ob = b.get();
  const numa::topology t = numa::read_topology("/");
  for (const auto* o : {&oa, &ob}) {
    const int device = o == &oa ? 0 : d1;
    CAPTURE(device);
    std::vector<std::uint64_t> v = o->seen, all(src.size());
    std::sort(v.begin(), v.end());
    std::iota(all.begin(), all.end(), 0);
    CHECK(v == all);
    const numa_stats& s = o->stats.numa;
    MESSAGE("cuda:" << device << " numa: node " << s.node << " (" << s.reason << "), slots "
                    << s.slot_pages_on_node << "/" << s.slot_pages << " pages on node, threads "
                    << s.threads_bound << "/" << s.threads << ", honoured " << s.honoured);
    if (t.nodes.empty()) continue;  // no NUMA sysfs: nothing to place
    const auto gpu_node = numa::pci_node("/", cuda::properties(device).pci_bus_id);
    const int want = gpu_node && *gpu_node >= 0 ? *gpu_node
                     : t.nodes.size() == 1      ? t.nodes.front().id
                                                : -1;
    CHECK(s.mode == "automatic");
    CHECK(s.node == want);
    if (want < 0) continue;
    CHECK(s.slots_bound);
    CHECK(s.slot_pages > 0);
    CHECK(s.slot_pages_on_node == s.slot_pages);
    CHECK(s.slot_node == want);
    CHECK(s.threads == 4);
    CHECK(s.worker_node == want);
    CHECK(s.honoured);
  }
}
