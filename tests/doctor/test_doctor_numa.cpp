// The doctor's "numa" check over fake sysfs trees: the node <-> cores <-> GPUs table, and a
// warning when this process's threads or memory sit on the far node of every GPU it can use.
#include <doctest/doctest.h>
#include <numaif.h>

#include <string>
#include <utility>
#include <vector>

#include "fake_sysfs.hpp"
#include "gpufeed/doctor/doctor.hpp"

using namespace gpufeed;
using test::fake_sysfs;

namespace {
std::string fact(const doctor_check& c, const std::string& key) {
  for (const auto& [k, v] : c.facts)
    if (k == key) return v;
  return "<missing " + key + ">";
}
std::vector<int> cores(int a, int b) {
  std::vector<int> v;
  for (int c = a; c <= b; ++c) v.push_back(c);
  return v;
}
doctor_check run(const numa_check_options& o) {
  doctor_report r;
  add_numa_check(r, o);
  REQUIRE(r.checks.size() == 1);
  return r.checks[0];
}
}  // namespace

TEST_CASE("8 GPUs on 2 sockets, process unbound: the table, and a pass") {
  fake_sysfs fs;
  test::two_sockets_eight_gpus(fs);
  numa_check_options o;
  o.root = fs.root();
  o.process_cpus = cores(0, 63);
  o.memory_policy = std::pair<int, std::vector<int>>{MPOL_DEFAULT, {}};
  const doctor_check c = run(o);
  CHECK(c.id == "numa");
  CHECK(c.status == check_status::pass);
  CHECK(fact(c, "node 0") ==
        "cores 0-15,32-47; GPUs 0000:18:00.0, 0000:2a:00.0, 0000:3a:00.0, 0000:5d:00.0");
  CHECK(fact(c, "node 1") ==
        "cores 16-31,48-63; GPUs 0000:9a:00.0, 0000:ab:00.0, 0000:ba:00.0, 0000:db:00.0");
  CHECK(fact(c, "GPU 0000:ab:00.0") == "node 1, cores 16-31,48-63");
  CHECK(fact(c, "this process").find("cores 0-63") != std::string::npos);
}

TEST_CASE("a rank bound to socket 0 that can use only GPU 5 (socket 1): threads and memory warned") {
  fake_sysfs fs;
  test::two_sockets_eight_gpus(fs);
  numa_check_options o;
  o.root = fs.root();
  o.gpus = {{"cuda:0 (0000:ab:00.0)", "0000:AB:00.0"}};  // CUDA_VISIBLE_DEVICES=5
  o.process_cpus = std::vector<int>{0, 1, 2, 3, 32, 33};
  o.memory_policy = std::pair<int, std::vector<int>>{MPOL_BIND, {0}};
  doctor_check c = run(o);
  CHECK(c.status == check_status::warn);
  CHECK(c.summary.find("threads and memory sit on the far node") != std::string::npos);
  CHECK(c.summary.find("cuda:0 (0000:ab:00.0)") != std::string::npos);
  CHECK(!c.hint.empty());

  o.process_cpus = cores(16, 19);  // threads near, memory still bound to node 0
  c = run(o);
  CHECK(c.status == check_status::warn);
  CHECK(c.summary.find("memory (and so pinned slots) sits on the far node") != std::string::npos);

  o.memory_policy = std::pair<int, std::vector<int>>{MPOL_BIND, {1}};  // both near: pass
  c = run(o);
  CHECK(c.status == check_status::pass);
}

TEST_CASE("one node and no GPU (this machine's layout), or no NUMA sysfs at all") {
  fake_sysfs fs;
  fs.node(0, "0-1");
  numa_check_options o;
  o.root = fs.root();
  doctor_check c = run(o);
  CHECK(c.status == check_status::pass);
  CHECK(c.summary.find("no NVIDIA GPU in sysfs") != std::string::npos);
  CHECK(fact(c, "node 0") == "cores 0-1; GPUs none");

  fake_sysfs none;
  o.root = none.root();
  CHECK(run(o).status == check_status::skip);

  // The real machine: whatever it is, the check runs and names this process.
  c = run(numa_check_options{});
  CHECK(c.status != check_status::fail);
}
