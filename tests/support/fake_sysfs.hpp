// A fake sysfs tree for the NUMA tests: nodes with cpulists, PCI devices with numa_node, vendor
// and class, under a temporary root (the root directory parameter of detail/numa/topology.hpp).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.hpp"

namespace gpufeed::test {

class fake_sysfs {
 public:
  fake_sysfs() : dir_("sysfs") {}
  [[nodiscard]] const std::filesystem::path& root() const noexcept { return dir_.path(); }

  void node(int id, const std::string& cpulist) {
    write("sys/devices/system/node/node" + std::to_string(id) + "/cpulist", cpulist + "\n");
  }
  // An NVIDIA GPU (vendor 0x10de, class 0x030200: 3D controller) at `bus_id` on `numa_node`.
  void gpu(const std::string& bus_id, int numa_node) {
    pci(bus_id, numa_node, "0x10de", "0x030200");
  }
  void pci(const std::string& bus_id, int numa_node, const std::string& vendor,
           const std::string& cls) {
    const std::string d = "sys/bus/pci/devices/" + bus_id + "/";
    write(d + "numa_node", std::to_string(numa_node) + "\n");
    write(d + "vendor", vendor + "\n");
    write(d + "class", cls + "\n");
  }
  void write(const std::string& rel, const std::string& text) {
    const auto p = root() / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }

 private:
  temp_dir dir_;
};

// Two sockets of 16 cores + 16 hyperthreads each, eight GPUs: four per socket, as on a typical
// 8-GPU server (the bus ids of a DGX-like layout).
inline void two_sockets_eight_gpus(fake_sysfs& fs) {
  fs.node(0, "0-15,32-47");
  fs.node(1, "16-31,48-63");
  const char* ids[8] = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                        "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"};
  for (int g = 0; g < 8; ++g) fs.gpu(ids[g], g < 4 ? 0 : 1);
  fs.pci("0000:00:1f.2", 0, "0x8086", "0x010601");  // a SATA controller: not a GPU
}

}  // namespace gpufeed::test
