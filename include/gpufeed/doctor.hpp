// gpufeed — the doctor: checks that tell a user, in plain words, whether this machine can keep a
// GPU fed and what stands in the way.
//
//   gpufeed::doctor_report r;
//   gpufeed::add_device_files_check(r);              // /dev/nvidia*, container hints
//   gpufeed::cuda::add_gpu_checks(r);                // gpufeed/cuda/doctor.hpp: GPU, PCIe, copies
//   gpufeed::add_storage_check(r, "/data/shards");   // storage and page-cache read rates
//   std::fputs(r.to_text().c_str(), stdout);         // or r.to_json_string()
//   return r.exit_code();                            // 1 if a check failed
//
// This header is host-only: everything here runs without CUDA, a driver or a GPU. The report
// types live in gpufeed/doctor_report.hpp (included). No check function throws for what it
// finds: a missing path, an unreadable file or a missing device is a check with status fail or
// skip and the reason in its summary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "gpufeed/detail/doctor/device_files.hpp"
#include "gpufeed/detail/doctor/storage.hpp"
#include "gpufeed/doctor_report.hpp"

namespace gpufeed {

// Where the device-file check looks. Only tests change these (to point at prepared trees).
struct device_files_options {
  std::filesystem::path dev_dir = "/dev";
  std::filesystem::path root = "/";       // container markers: /.dockerenv, /run/.containerenv
  std::filesystem::path proc_dir = "/proc";  // /proc/1/cgroup, /proc/driver/nvidia/version
};

// Adds check "device_files": /dev/nvidiactl, /dev/nvidia-uvm and /dev/nvidia<N> exist and this
// user can open them. When they are missing it says why in plain words, with a hint: a container
// started without GPU access (Docker, Podman, Kubernetes), a loaded driver whose files were not
// created, a missing nvidia-uvm module, or no NVIDIA driver at all (status warn: a machine
// without a GPU is not broken; gpufeed then delivers batches in host memory).
inline void add_device_files_check(doctor_report& report, const device_files_options& opts = {}) {
  report.add(detail::doctor::device_files_check(opts.dev_dir, opts.root, opts.proc_dir));
}

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

// Adds check "storage": reads the regular files under data (a directory, recursively, or one
// file) sequentially in large blocks and reports the storage (cold) and page-cache (warm) read
// rates, how much of the data is already cached, and whether it fits in the page cache. An empty
// path gives a skip; a missing path, no data or an unreadable file gives a fail naming it.
inline void add_storage_check(doctor_report& report, const std::filesystem::path& data,
                              const storage_check_options& opts = {}) {
  detail::doctor::storage_params p;
  p.path = data;
  p.max_bytes = opts.max_bytes;
  p.block_bytes = opts.block_bytes;
  p.direct_io = opts.direct_io;
  p.residency_max_bytes = opts.residency_max_bytes;
  p.max_files = opts.max_files;
  p.meminfo = opts.meminfo;
  report.add(detail::doctor::storage_check(p));
}

// The GPU checks' ids and titles, in report order. gpufeed::cuda::add_gpu_checks adds exactly
// these; add_skipped_gpu_checks adds them as skipped where CUDA is not available at all.
struct doctor_check_name {
  std::string_view id;
  std::string_view title;
};
inline constexpr doctor_check_name gpu_check_names[] = {
    {"gpu.visible", "GPU visible to CUDA"},
    {"gpu.versions", "Driver and CUDA runtime versions"},
    {"gpu.devices", "GPU name, memory and compute capability"},
    {"gpu.nvml", "NVML (the driver's management library)"},
    {"gpu.pcie", "PCIe link"},
    {"gpu.throttle", "Clock throttle reasons"},
    {"gpu.h2d", "Host-to-device copy rate, pinned against pageable"},
};

// The title of a GPU check by id ("" for an unknown id).
inline std::string gpu_check_title(std::string_view id) {
  for (const auto& n : gpu_check_names)
    if (n.id == id) return std::string(n.title);
  return {};
}

// Adds every GPU check with status skip and the reason, e.g. "this gpufeed was built without
// CUDA", so a report always has the same check ids.
inline void add_skipped_gpu_checks(doctor_report& report, const std::string& reason) {
  for (const auto& n : gpu_check_names)
    report.add(doctor_check(std::string(n.id), std::string(n.title), check_status::skip, reason));
}

}  // namespace gpufeed
