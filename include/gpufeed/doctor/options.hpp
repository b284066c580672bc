// gpufeed — the host doctor checks' options: a leaf header (no detail/) so that doctor.hpp and
// the doctor/detail code that runs the checks both name these types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpufeed {

// Where the device-file check looks. Only tests change these (to point at prepared trees).
struct device_files_options {
  std::filesystem::path dev_dir = "/dev";
  std::filesystem::path root = "/";       // container markers: /.dockerenv, /run/.containerenv
  std::filesystem::path proc_dir = "/proc";  // /proc/1/cgroup, /proc/driver/nvidia/version
};

struct storage_check_options {
  // At most this many bytes are read per pass (two or three passes), so the check finishes in
  // seconds on any storage: 1 GiB at the 1-2.6 GB/s an NVMe drive gives one thread.
  std::uint64_t max_bytes = std::uint64_t{1} << 30;
  std::size_t block_bytes = std::size_t{16} << 20;  // per read() call, rounded up to 4 KiB
  // Measure the cold rate with O_DIRECT (bypasses the page cache without evicting anything).
  // Where the file system refuses it, the first buffered read is reported instead, and said so.
  bool direct_io = true;
  std::uint64_t residency_max_bytes = std::uint64_t{256} << 30;  // page-cache residency scanned
  std::size_t max_files = 1'000'000;                             // files listed under the path
  std::filesystem::path meminfo = "/proc/meminfo";
};

// What the NUMA check looks at. Tests point root at a fake sysfs tree and set the process's
// cores and memory policy; by default they are read from this process.
struct numa_check_options {
  std::filesystem::path root = "/";  // sysfs is under root/sys
  struct gpu {
    std::string name;    // how the report names it, e.g. "cuda:0 (0000:17:00.0)"
    std::string bus_id;  // its PCI bus id
  };
  // The GPUs this process can use (the CLI passes CUDA's); empty: every NVIDIA GPU in sysfs.
  std::vector<gpu> gpus;
  std::optional<std::vector<int>> process_cpus;                  // default: sched_getaffinity
  std::optional<std::pair<int, std::vector<int>>> memory_policy;  // mode, nodes: get_mempolicy
};

}  // namespace gpufeed
