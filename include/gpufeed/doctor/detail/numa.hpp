// gpufeed::detail::doctor — the "numa" check: the GPU <-> NUMA node <-> cores table from sysfs,
// where this process may run and where its memory goes, and a warning when either sits on the
// far node of every GPU it can use (the loader's own placement is in loader_stats::numa).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "gpufeed/detail/numa/binding.hpp"
#include "gpufeed/detail/numa/topology.hpp"
#include "gpufeed/doctor/options.hpp"
#include "gpufeed/doctor/report.hpp"

namespace gpufeed::detail::doctor {

inline std::string cpu_ranges(const std::vector<int>& cpus) {
  std::string s;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(cpus[i]) +
         (j > i ? "-" + std::to_string(cpus[j]) : std::string());
    i = j + 1;
  }
  return s;
}

inline const char* policy_name(int mode) {
  switch (mode) {
    case MPOL_DEFAULT: return "default (local node of the thread that touches it first)";
    case MPOL_BIND: return "bind";
    case MPOL_PREFERRED: return "preferred";
    case MPOL_INTERLEAVE: return "interleave";
    default: return "other";
  }
}

inline doctor_check numa_check(const numa_check_options& o) {
  namespace nm = gpufeed::detail::numa;
  doctor_check c("numa", "NUMA placement: GPUs, nodes and cores");
  const nm::topology t = nm::read_topology(o.root);
  if (t.nodes.empty()) {
    c.status = check_status::skip;
    c.summary = "the kernel lists no NUMA nodes (" +
                (o.root / "sys/devices/system/node").string() + "): nothing to place";
    return c;
  }
  std::vector<numa_check_options::gpu> gpus = o.gpus;
  if (gpus.empty())
    for (const auto& g : nm::nvidia_gpus(o.root)) gpus.push_back({g.bus_id, g.bus_id});
  const std::vector<int> cpus = o.process_cpus ? *o.process_cpus : nm::allowed_cpus();
  nm::memory_policy pol;
  if (o.memory_policy) {
    pol.mode = o.memory_policy->first;
    pol.nodes = o.memory_policy->second;
  } else {
    pol = nm::thread_memory_policy();
  }

  for (const auto& n : t.nodes) {
    std::string on;
    for (const auto& g : gpus)
      if (nm::pci_node(o.root, g.bus_id).value_or(-1) == n.id) on += (on.empty() ? "" : ", ") + g.name;
    c.fact("node " + std::to_string(n.id),
           "cores " + (n.cpulist.empty() ? std::string("none") : n.cpulist) + "; GPUs " +
               (on.empty() ? std::string("none") : on));
  }
  std::size_t near_cpu = 0, near_mem = 0, placed = 0;
  std::string far;
  const bool restricted_mem = pol.mode == MPOL_BIND || pol.mode == MPOL_PREFERRED;
  for (const auto& g : gpus) {
    const int node = nm::pci_node(o.root, g.bus_id).value_or(-1);
    const nm::node_info* n = t.find(node);
    c.fact("GPU " + g.name, n ? "node " + std::to_string(node) + ", cores " + n->cpulist
                              : std::string("no node reported by sysfs"));
    if (!n) continue;
    ++placed;
    const bool cpu_ok = std::any_of(cpus.begin(), cpus.end(), [&](int x) {
      return std::count(n->cpus.begin(), n->cpus.end(), x) > 0;
    });
    const bool mem_ok = !restricted_mem || std::count(pol.nodes.begin(), pol.nodes.end(), node);
    near_cpu += cpu_ok;
    near_mem += mem_ok;
    if (!cpu_ok || !mem_ok) far += (far.empty() ? "" : ", ") + g.name;
  }
  c.fact("this process", "may run on cores " + cpu_ranges(cpus) + "; memory policy " +
                             policy_name(pol.mode) +
                             (restricted_mem ? " to node(s) " + cpu_ranges(pol.nodes) : ""));
  c.number("nodes", static_cast<double>(t.nodes.size()));
  c.number("gpus", static_cast<double>(gpus.size()));
  if (placed == 0) {
    c.status = check_status::pass;
    c.summary = std::to_string(t.nodes.size()) + " NUMA node(s); " +
                (gpus.empty() ? std::string("no NVIDIA GPU in sysfs")
                              : std::string("sysfs gives no node for the GPUs")) +
                ": nothing to place";
    return c;
  }
  if (near_cpu == 0 || near_mem == 0) {
    c.status = check_status::warn;
    c.summary = std::string("this process's ") +
                (near_cpu == 0 && near_mem == 0 ? "threads and memory sit"
                 : near_cpu == 0               ? "threads sit"
                                               : "memory (and so pinned slots) sits") +
                " on the far node of every GPU it can use (" + far + ")";
    c.hint = "run one process per GPU bound to the GPU's node (numactl --cpunodebind=N "
             "--membind=N, or the launcher's binding), or leave loader_config::numa automatic "
             "and the process unbound so each loader places itself";
    return c;
  }
  c.status = check_status::pass;
  c.summary = std::to_string(t.nodes.size()) + " NUMA node(s), " + std::to_string(gpus.size()) +
              " GPU(s): this process can run and allocate near " + std::to_string(near_cpu) +
              " of them";
  if (!far.empty()) c.fact("far GPUs", far + " (a loader there places itself on its node)");
  return c;
}

}  // namespace gpufeed::detail::doctor
