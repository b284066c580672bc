// gpufeed::detail::numa — which node a loader is placed on, and which cores that gives its
// threads: a pure decision over a topology read from sysfs (topology.hpp), tested against fake
// 2-node and 8-GPU trees.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gpufeed/detail/numa/topology.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/numa.hpp"

namespace gpufeed::detail::numa {

struct placement {
  int node = -1;          // -1: do not place
  std::vector<int> cpus;  // cores to bind threads to (empty: leave threads alone)
  std::string cpulist;
  std::string reason;
};

inline const char* mode_name(numa_setting::mode m) noexcept {
  switch (m) {
    case numa_setting::mode::automatic: return "automatic";
    case numa_setting::mode::node: return "node";
    case numa_setting::mode::off: return "off";
  }
  return "?";
}

inline placement on(const topology& t, int node, std::string why) {
  placement p;
  const node_info* n = t.find(node);
  p.node = node;
  p.cpus = n->cpus;
  p.cpulist = n->cpulist;
  p.reason = std::move(why);
  if (p.cpus.empty()) p.reason += "; the node has no cores (memory only): threads are not bound";
  return p;
}

// `target` names the loader's target ("cuda:0 (...)" or "host"); `bus_id` is the device's PCI
// bus id ("" for the host target). config_error when mode::node names a node sysfs does not list.
inline placement decide(const numa_setting& s, const topology& t, std::string_view target,
                        std::string_view bus_id, const std::filesystem::path& root) {
  placement p;
  if (s.how == numa_setting::mode::off) {
    p.reason = "numa_setting::off()";
    return p;
  }
  if (t.nodes.empty()) {
    p.reason = "the kernel lists no NUMA nodes under " +
               (root / "sys/devices/system/node").string();
    return p;
  }
  if (s.how == numa_setting::mode::node) {
    if (!t.find(s.node)) {
      std::string have;
      for (const auto& n : t.nodes) have += (have.empty() ? "" : ", ") + std::to_string(n.id);
      throw config_error("numa_setting::on_node(" + std::to_string(s.node) +
                         "): no such NUMA node (this machine has node(s) " + have + ")");
    }
    return on(t, s.node, "node " + std::to_string(s.node) + " as configured");
  }
  // automatic
  if (bus_id.empty()) {
    p.reason = "host target: no device to be near (set numa_setting::on_node(n) to place it)";
    return p;
  }
  const std::string id = sysfs_bus_id(bus_id);
  const auto node = pci_node(root, id);
  const std::string who = std::string(target) + " (" + id + ")";
  if (node && *node >= 0 && t.find(*node))
    return on(t, *node, who + " is on node " + std::to_string(*node));
  if (t.nodes.size() == 1)
    return on(t, t.nodes.front().id,
              who + ": sysfs gives no node for it" + std::string(node ? " (-1)" : "") +
                  "; the machine's only node is " + std::to_string(t.nodes.front().id));
  p.reason = who + ": sysfs gives no node for it and the machine has " +
             std::to_string(t.nodes.size()) + " nodes: not placed";
  return p;
}

}  // namespace gpufeed::detail::numa
