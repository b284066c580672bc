// gpufeed — NUMA placement of a loader: which node its slots are allocated on and whose cores its
// planner and workers run on (numa_setting, in loader_config), and what was done (numa_stats, in
// loader_stats).
//
// On a host with two sockets a GPU hangs off one of them; pinned slots on the other socket's
// memory cross the socket link twice (workers' writes, then the DMA read), and workers there read
// into remote memory. So by default a device-target loader allocates its slots on the GPU's node
// (from sysfs, by the GPU's PCI bus id) and binds its threads to that node's cores. The host
// target has no device to be near: automatic leaves it unplaced; name a node to place it.
// Placement is best effort: what could not be done is reported in numa_stats, never an error
// (except a node that does not exist, a config_error).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gpufeed {

struct numa_setting {
  enum class mode {
    automatic,  // the target device's node (device targets); nothing on the host target
    node,       // the node given in `node`
    off,        // no placement: memory and threads wherever the OS puts them
  };
  mode how = mode::automatic;
  int node = -1;  // with mode::node

  static numa_setting automatic() noexcept { return {}; }
  static numa_setting on_node(int n) noexcept { return {mode::node, n}; }
  static numa_setting off() noexcept { return {mode::off, -1}; }
};

struct numa_stats {
  std::string mode;    // "automatic", "node" or "off"
  int node = -1;       // the node chosen; -1: none
  std::string reason;  // why that node, or why none (e.g. "cuda:0 (0000:17:00.0) is on node 1")
  std::string cpus;    // the chosen node's cpulist, the threads' affinity ("" when not bound)
  // Slots: bound with mbind, then every page's node read back with move_pages.
  bool slots_bound = false;
  std::uint64_t slot_pages = 0, slot_pages_on_node = 0;
  int slot_node = -1;  // the node all slot pages are on; -1 when mixed, unknown or unbound
  // Threads (planner + workers): affinity set to the node's cores and read back.
  std::size_t threads = 0, threads_bound = 0;
  int worker_node = -1;  // the node every bound thread is restricted to; -1 otherwise
  // True when a node was chosen, every slot page is on it and every thread is bound to it.
  bool honoured = false;
};

}  // namespace gpufeed
