// gpufeed::detail::numa — the machine's NUMA layout as Linux's sysfs describes it: nodes and
// their cores (/sys/devices/system/node/node<N>/cpulist) and the node of a PCI device
// (/sys/bus/pci/devices/<bus id>/numa_node). Every function takes the file system root, so tests
// read a fake tree (2 sockets, 8 GPUs) made in a temporary directory; production passes "/".
// Plain file reads: libnuma answers only for the machine it runs on, and hwloc would be a
// second topology library for the two files read here.
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpufeed::detail::numa {

struct node_info {
  int id = -1;
  std::string cpulist;    // as sysfs writes it, e.g. "0-15,32-47"
  std::vector<int> cpus;  // the same, expanded
};

struct topology {
  std::vector<node_info> nodes;  // by id, ascending
  [[nodiscard]] const node_info* find(int id) const noexcept {
    for (const auto& n : nodes)
      if (n.id == id) return &n;
    return nullptr;
  }
};

// A GPU as sysfs sees it (NVIDIA vendor 0x10de, PCI class 0x03xxxx: display controllers).
struct pci_gpu {
  std::string bus_id;  // sysfs spelling: "0000:17:00.0"
  int node = -1;       // -1: the firmware reports no affinity
};

inline std::optional<std::string> read_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string s;
  if (!in || !std::getline(in, s)) return std::nullopt;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; nullopt for anything else (an empty list is valid: a node
// of memory only).
inline std::optional<std::vector<int>> parse_cpulist(std::string_view s) {
  std::vector<int> out;
  std::size_t i = 0;
  auto number = [&](int& v) {
    if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    long long x = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      x = x * 10 + (s[i++] - '0');
      if (x > 1 << 20) return false;
    }
    v = static_cast<int>(x);
    return true;
  };
  while (i < s.size()) {
    int a = 0, b = 0;
    if (!number(a)) return std::nullopt;
    b = a;
    if (i < s.size() && s[i] == '-') {
      ++i;
      if (!number(b) || b < a) return std::nullopt;
    }
    for (int c = a; c <= b; ++c) out.push_back(c);
    if (i < s.size()) {
      if (s[i] != ',') return std::nullopt;
      ++i;
    }
  }
  return out;
}

// The nodes under <root>/sys/devices/system/node; empty when the kernel exposes none (no NUMA
// support) or a cpulist does not parse.
inline topology read_topology(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  topology t;
  std::error_code ec;
  const fs::path dir = root / "sys/devices/system/node";
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 5 || name.compare(0, 4, "node") != 0 ||
        !std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    node_info n;
    n.id = std::stoi(name.substr(4));
    const auto list = read_line(it->path() / "cpulist");
    const auto cpus = list ? parse_cpulist(*list) : std::nullopt;
    if (!cpus) continue;
    n.cpulist = *list;
    n.cpus = *cpus;
    t.nodes.push_back(std::move(n));
  }
  std::sort(t.nodes.begin(), t.nodes.end(),
            [](const node_info& a, const node_info& b) { return a.id < b.id; });
  return t;
}

// sysfs spelling of a PCI bus id: lower case, a 4-digit domain. CUDA writes "0000:17:00.0",
// NVML "00000000:17:00.0"; both name /sys/bus/pci/devices/0000:17:00.0.
inline std::string sysfs_bus_id(std::string_view id) {
  std::string s(id);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::size_t colon = s.find(':');
  if (colon != std::string::npos && colon > 4) {
    const std::string head = s.substr(0, colon - 4);
    if (std::all_of(head.begin(), head.end(), [](char c) { return c == '0'; }))
      s.erase(0, colon - 4);
  }
  return s;
}

// The NUMA node of PCI device `bus_id`: nullopt when sysfs has no such device or no numa_node
// file; -1 when the firmware reports no affinity (common on one-socket machines and VMs).
inline std::optional<int> pci_node(const std::filesystem::path& root, std::string_view bus_id) {
  const auto v = read_line(root / "sys/bus/pci/devices" / sysfs_bus_id(bus_id) / "numa_node");
  if (!v || v->empty()) return std::nullopt;
  try {
    return std::stoi(*v);
  } catch (...) {
    return std::nullopt;
  }
}

// Every NVIDIA display controller under <root>/sys/bus/pci/devices, by bus id.
inline std::vector<pci_gpu> nvidia_gpus(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::vector<pci_gpu> out;
  std::error_code ec;
  for (fs::directory_iterator it(root / "sys/bus/pci/devices", ec), end; !ec && it != end;
       it.increment(ec)) {
    const auto vendor = read_line(it->path() / "vendor");
    const auto cls = read_line(it->path() / "class");
    if (!vendor || !cls || *vendor != "0x10de" || cls->compare(0, 4, "0x03") != 0) continue;
    pci_gpu g;
    g.bus_id = it->path().filename().string();
    g.node = pci_node(root, g.bus_id).value_or(-1);
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(),
            [](const pci_gpu& a, const pci_gpu& b) { return a.bus_id < b.bus_id; });
  return out;
}

}  // namespace gpufeed::detail::numa
