// NUMA placement on this machine's real node(s): two host-target loaders in one process, each
// placed on a node, deliver every record once, their slots are bound there (get_mempolicy on
// the delivered batch's own memory) and on it (move_pages), their threads run on its cores, and
// stats().numa says so. Off and automatic-on-host place nothing.
#include <doctest/doctest.h>
#include <numaif.h>

#include <algorithm>
#include <future>
#include <numeric>
#include <vector>

#include "expect_error.hpp"
#include "gpufeed/detail/numa/binding.hpp"
#include "gpufeed/detail/numa/topology.hpp"
#include "gpufeed/loader.hpp"
#include "memory_source.hpp"

using namespace gpufeed;
using test::memory_source;
namespace numa = gpufeed::detail::numa;

namespace {

// The policy of the page holding p: mode and nodes.
numa::memory_policy policy_at(const void* p) {
  numa::memory_policy m;
  unsigned long mask[16] = {};
  int mode = -1;
  if (::get_mempolicy(&mode, mask, 16 * 64, const_cast<void*>(p), MPOL_F_ADDR) != 0) return m;
  m.mode = mode;
  for (int b = 0; b < 16 * 64; ++b)
    if (mask[b / 64] >> (b % 64) & 1ul) m.nodes.push_back(b);
  return m;
}

struct run_result {
  std::vector<std::uint64_t> seen;
  std::vector<numa::memory_policy> slot_policies;
  loader_stats stats;
};

run_result run_one(const memory_source& src, numa_setting where, std::uint64_t seed) {
  loader_config c;
  c.batch_size = 50;
  c.seed = seed;
  c.part = partition{};
  c.epochs = 1;
  c.numa = where;
  loader<memory_source, loader_options<3, 2, 1>> l(src, c);
  run_result r;
  for (auto& b : l.epoch()) {
    for (std::size_t k = 0; k < b.size(); ++k) {
      CHECK(src.matches(b.indices()[k], b.record(k)));
      r.seen.push_back(b.indices()[k]);
    }
    r.slot_policies.push_back(policy_at(b.data().data()));
  }
  r.stats = l.stats();
  return r;
}

void check_all_once(std::vector<std::uint64_t> v, std::uint64_t n) {
  std::sort(v.begin(), v.end());
  std::vector<std::uint64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  CHECK(v == all);
}

}  // namespace

TEST_CASE("two host loaders at once, each placed on a node: slots bound there, threads on its cores") {
  const numa::topology t = numa::read_topology("/");
  REQUIRE_MESSAGE(!t.nodes.empty(), "this kernel exposes no NUMA nodes");
  const int a = t.nodes.front().id, b = t.nodes.back().id;  // the same node on a 1-node host
  memory_source src(1000, 4096);  // 50 x 4 KiB records: a 200 KiB slot, 50 pages
  auto fa = std::async(std::launch::async, [&] { return run_one(src, numa_setting::on_node(a), 1); });
  auto fb = std::async(std::launch::async, [&] { return run_one(src, numa_setting::on_node(b), 2); });
  const run_result ra = fa.get(), rb = fb.get();
  for (const auto* r : {&ra, &rb}) {
    const int node = r == &ra ? a : b;
    check_all_once(r->seen, 1000);
    const numa_stats& s = r->stats.numa;
    CHECK(s.mode == "node");
    CHECK(s.node == node);
    CHECK(s.cpus == t.find(node)->cpulist);
    CHECK(s.slots_bound);
    CHECK(s.slot_pages >= 50);
    CHECK(s.slot_pages_on_node == s.slot_pages);
    CHECK(s.slot_node == node);
    CHECK(s.threads == 4);  // planner + 3 workers
    CHECK(s.threads_bound == 4);
    CHECK(s.worker_node == node);
    CHECK(s.honoured);
    for (const auto& p : r->slot_policies) {  // the batch's own memory: MPOL_BIND to the node
      CHECK(p.mode == MPOL_BIND);
      CHECK(p.nodes == std::vector<int>{node});
    }
  }
}

TEST_CASE("off, and automatic on the host target, place nothing and say why") {
  memory_source src(200, 4096);
  for (const numa_setting where : {numa_setting::off(), numa_setting::automatic()}) {
    const run_result r = run_one(src, where, 3);
    check_all_once(r.seen, 200);
    const numa_stats& s = r.stats.numa;
    CHECK(s.node == -1);
    CHECK_FALSE(s.slots_bound);
    CHECK(s.threads_bound == 0);
    CHECK(s.worker_node == -1);
    CHECK_FALSE(s.honoured);
    CHECK(!s.reason.empty());
    if (where.how == numa_setting::mode::automatic) CHECK(test::has(s.reason, "host target"));
    for (const auto& p : r.slot_policies) CHECK(p.mode == MPOL_DEFAULT);
  }
}

TEST_CASE("a node the machine does not have is a config_error at construction") {
  memory_source src(100, 64);
  loader_config c;
  c.part = partition{};
  c.numa = numa_setting::on_node(999);
  const auto e = test::error_of<config_error>([&] { loader<memory_source> l(src, c); });
  CHECK(test::has(e, "on_node(999)"));
}

TEST_CASE("binding primitives: a mapping bound before its first touch, a thread bound to cores") {
  const numa::topology t = numa::read_topology("/");
  REQUIRE(!t.nodes.empty());
  const int node = t.nodes.front().id;
  int err = -1;
  numa::node_mapping m(1 << 20, 4096, node, true, err);
  CHECK(err == 0);
  const numa::page_census c = numa::census(m.data(), 1 << 20, node);
  CHECK(c.pages == 256);
  CHECK(c.on_node == 256);
  CHECK(c.single_node == node);
  CHECK(policy_at(m.data()).mode == MPOL_BIND);

  std::async(std::launch::async, [&] {
    CHECK(numa::bind_this_thread(t.nodes.front().cpus));
    for (const int cpu : numa::allowed_cpus())
      CHECK(std::count(t.nodes.front().cpus.begin(), t.nodes.front().cpus.end(), cpu) == 1);
  }).get();
  CHECK_FALSE(numa::bind_this_thread({}));
}
