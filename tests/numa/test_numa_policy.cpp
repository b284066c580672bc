// NUMA placement decisions against fake sysfs trees (2 nodes, 8 GPUs; one node; none): which
// node a loader is placed on and which cores its threads get.
#include <doctest/doctest.h>

#include <vector>

#include "expect_error.hpp"
#include "fake_sysfs.hpp"
#include "gpufeed/detail/numa/policy.hpp"
#include "gpufeed/detail/numa/topology.hpp"

using namespace gpufeed;
using namespace gpufeed::detail::numa;
using test::fake_sysfs;

namespace {
std::vector<int> range(int a, int b) {  // [a, b]
  std::vector<int> v;
  for (int c = a; c <= b; ++c) v.push_back(c);
  return v;
}
std::vector<int> join(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
}  // namespace

TEST_CASE("cpulist parsing: ranges, singles, empty; malformed lists are refused") {
  CHECK(parse_cpulist("0-3,8,10-11") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpulist("5") == std::vector<int>{5});
  CHECK(parse_cpulist("")->empty());
  CHECK_FALSE(parse_cpulist("3-1"));
  CHECK_FALSE(parse_cpulist("0-"));
  CHECK_FALSE(parse_cpulist("a"));
  CHECK_FALSE(parse_cpulist("1,,2"));
}

TEST_CASE("bus ids: CUDA's and NVML's spellings name the same sysfs device") {
  CHECK(sysfs_bus_id("0000:9A:00.0") == "0000:9a:00.0");
  CHECK(sysfs_bus_id("00000000:9A:00.0") == "0000:9a:00.0");
  CHECK(sysfs_bus_id("0001:9a:00.0") == "0001:9a:00.0");
}

TEST_CASE("2 nodes, 8 GPUs: topology, GPU nodes, and each GPU's loader on its socket's cores") {
  fake_sysfs fs;
  test::two_sockets_eight_gpus(fs);
  const topology t = read_topology(fs.root());
  REQUIRE(t.nodes.size() == 2);
  CHECK(t.nodes[0].cpus == join(range(0, 15), range(32, 47)));
  CHECK(t.nodes[1].cpus == join(range(16, 31), range(48, 63)));

  const auto gpus = nvidia_gpus(fs.root());
  REQUIRE(gpus.size() == 8);  // the SATA controller is not listed
  for (std::size_t g = 0; g < 8; ++g) CHECK(gpus[g].node == (g < 4 ? 0 : 1));

  // CUDA spells bus ids in upper case.
  const placement p5 = decide(numa_setting::automatic(), t, "cuda:5", "0000:AB:00.0", fs.root());
  CHECK(p5.node == 1);
  CHECK(p5.cpus == t.nodes[1].cpus);
  CHECK(p5.cpulist == "16-31,48-63");
  CHECK(p5.reason.find("cuda:5 (0000:ab:00.0) is on node 1") != std::string::npos);
  const placement p0 = decide(numa_setting::automatic(), t, "cuda:0", "0000:18:00.0", fs.root());
  CHECK(p0.node == 0);
  CHECK(p0.cpus == t.nodes[0].cpus);

  // An explicit node wins over the device's; off places nothing.
  CHECK(decide(numa_setting::on_node(0), t, "cuda:5", "0000:ab:00.0", fs.root()).node == 0);
  const placement off = decide(numa_setting::off(), t, "cuda:5", "0000:ab:00.0", fs.root());
  CHECK(off.node == -1);
  CHECK(off.cpus.empty());
  // The host target has no device: automatic leaves it, a node places it.
  CHECK(decide(numa_setting::automatic(), t, "host", "", fs.root()).node == -1);
  CHECK(decide(numa_setting::on_node(1), t, "host", "", fs.root()).cpus == t.nodes[1].cpus);
  // A node that does not exist is the user's mistake.
  const auto e = test::error_of<config_error>(
      [&] { (void)decide(numa_setting::on_node(2), t, "host", "", fs.root()); });
  CHECK(test::has(e, "no such NUMA node"));
  CHECK(test::has(e, "node(s) 0, 1"));
}

TEST_CASE("no affinity reported (-1) or no such device: the only node if there is one, else none") {
  fake_sysfs two;
  two.node(0, "0-3");
  two.node(1, "4-7");
  two.gpu("0000:17:00.0", -1);
  const topology t2 = read_topology(two.root());
  const placement p = decide(numa_setting::automatic(), t2, "cuda:0", "0000:17:00.0", two.root());
  CHECK(p.node == -1);
  CHECK(p.reason.find("not placed") != std::string::npos);
  CHECK(decide(numa_setting::automatic(), t2, "cuda:1", "0000:99:00.0", two.root()).node == -1);

  fake_sysfs one;  // a one-socket VM: the firmware gives -1
  one.node(0, "0-7");
  one.gpu("0000:17:00.0", -1);
  const placement q =
      decide(numa_setting::automatic(), read_topology(one.root()), "cuda:0", "0000:17:00.0",
             one.root());
  CHECK(q.node == 0);
  CHECK(q.cpus == range(0, 7));
}

TEST_CASE("a node of memory only is placed without binding threads; no NUMA sysfs: nothing") {
  fake_sysfs fs;
  fs.node(0, "0-7");
  fs.node(1, "");  // e.g. CXL or HBM memory
  const topology t = read_topology(fs.root());
  REQUIRE(t.nodes.size() == 2);
  const placement p = decide(numa_setting::on_node(1), t, "host", "", fs.root());
  CHECK(p.node == 1);
  CHECK(p.cpus.empty());
  CHECK(p.reason.find("no cores") != std::string::npos);

  fake_sysfs none;
  const placement n = decide(numa_setting::on_node(0), read_topology(none.root()), "host", "",
                             none.root());
  CHECK(n.node == -1);
  CHECK(n.reason.find("lists no NUMA nodes") != std::string::npos);
}
