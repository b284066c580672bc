// gpufeed — the doctor: checks that tell a user, in plain words, whether this machine can keep a
// GPU fed and what stands in the way.
//
//   gpufeed::doctor_report r;
//   gpufeed::add_device_files_check(r);              // /dev/nvidia*, container hints
//   gpufeed::cuda::add_gpu_checks(r);                // gpufeed/cuda/doctor/gpu_checks.hpp: GPU, PCIe, copies
//   gpufeed::add_storage_check(r, "/data/shards");   // storage and page-cache read rates
//   std::fputs(r.to_text().c_str(), stdout);         // or r.to_json_string()
//   return r.exit_code();                            // 1 if a check failed
//
// This header is host-only: everything here runs without CUDA, a driver or a GPU. The report
// types live in gpufeed/doctor/report.hpp, the options in gpufeed/doctor/options.hpp (both
// included). No check function throws for what it
// finds: a missing path, an unreadable file or a missing device is a check with status fail or
// skip and the reason in its summary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "gpufeed/doctor/detail/device_files.hpp"
#include "gpufeed/doctor/detail/numa.hpp"
#include "gpufeed/doctor/detail/storage.hpp"
#include "gpufeed/doctor/options.hpp"
#include "gpufeed/doctor/report.hpp"

namespace gpufeed {

// Adds check "device_files": /dev/nvidiactl, /dev/nvidia-uvm and /dev/nvidia<N> exist and this
// user can open them. When they are missing it says why in plain words, with a hint: a container
// started without GPU access (Docker, Podman, Kubernetes), a loaded driver whose files were not
// created, a missing nvidia-uvm module, or no NVIDIA driver at all (status warn: a machine
// without a GPU is not broken; gpufeed then delivers batches in host memory).
inline void add_device_files_check(doctor_report& report, const device_files_options& opts = {}) {
  report.add(detail::doctor::device_files_check(opts.dev_dir, opts.root, opts.proc_dir));
}

// Adds check "storage": reads the regular files under data (a directory, recursively, or one
// file) sequentially in large blocks and reports the storage (cold) and page-cache (warm) read
// rates, how much of the data is already cached, and whether it fits in the page cache. An empty
// path gives a skip; a missing path, no data or an unreadable file gives a fail naming it.
inline void add_storage_check(doctor_report& report, const std::filesystem::path& data,
                              const storage_check_options& opts = {}) {
  report.add(detail::doctor::storage_check(data, opts));
}

// Adds check "numa": a fact per NUMA node (its cores and GPUs), per GPU (its node and cores) and
// for this process (the cores it may run on, its memory policy). warn when this process's
// threads or memory sit on the far node of every GPU (opts.gpus, else every NVIDIA GPU sysfs
// lists), e.g. a rank bound by numactl to the socket its GPU is not on; skip without NUMA sysfs.
inline void add_numa_check(doctor_report& report, const numa_check_options& opts = {}) {
  report.add(detail::doctor::numa_check(opts));
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
