// gpufeed::cuda — the doctor's GPU checks: is a GPU visible, do driver and runtime fit, what is
// the GPU, how is its PCIe link doing, is it throttled, and what do pinned and pageable
// host-to-device copies reach on it?
//
//   gpufeed::doctor_report r;
//   gpufeed::cuda::add_gpu_checks(r);   // adds exactly the ids in gpufeed::gpu_check_names
//
// Never throws for what it finds and never crashes without a GPU: no driver, no device, a
// mismatched driver or a missing NVML become checks with status warn, fail or skip and the
// reason in plain words. NVML (libnvidia-ml.so.1) is loaded at run time with dlopen, never
// linked; where it is missing the PCIe and throttle checks are skipped and say so.
//
// Cost: with a GPU, about one second per GPU (the copy-rate measurement: ~1.3 GiB of pinned
// memory and device memory, freed before returning); set measure_h2d = false to skip it.
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <vector>

#include "gpufeed/cuda/doctor/detail/checks.hpp"
#include "gpufeed/cuda/doctor/detail/h2d.hpp"
#include "gpufeed/cuda/doctor/detail/link_checks.hpp"
#include "gpufeed/cuda/doctor/detail/probe.hpp"
#include "gpufeed/cuda/device.hpp"
#include "gpufeed/doctor/detail/nvml.hpp"
#include "gpufeed/doctor/doctor.hpp"

namespace gpufeed::cuda {

struct gpu_check_options {
  // No usable GPU is a fail (not a warn) even on a machine without an NVIDIA driver: for
  // programs that must not fall back to host memory.
  bool require_gpu = false;
  // The NVML library dlopen loads; tests point it elsewhere to simulate a missing or fake NVML.
  std::string nvml_library = "libnvidia-ml.so.1";
  bool measure_h2d = true;
  // Copy sizes measured, pinned and pageable. Each is copied at least 3 times and about
  // h2d_bytes_per_size bytes in all.
  std::vector<std::size_t> h2d_sizes = {std::size_t{64} << 10, std::size_t{1} << 20,
                                        std::size_t{16} << 20, std::size_t{256} << 20};
  std::size_t h2d_bytes_per_size = std::size_t{512} << 20;
  int max_devices = -1;  // examine at most this many GPUs; -1: all
};

struct h2d_sample {
  std::size_t bytes = 0;
  double pinned_gbps = 0.0;
  double pageable_gbps = 0.0;
};

// Host-to-device copy rates on `device`, per size (in the order given): GB/s of back-to-back
// cudaMemcpyAsync calls from pinned and from pageable memory on one non-blocking stream, timed
// with CUDA events. Throws cuda_error (no device, allocation) or config_error (no sizes, a size
// of 0). Restores the caller's current device.
inline std::vector<h2d_sample> measure_h2d(int device, const std::vector<std::size_t>& sizes,
                                           std::size_t bytes_per_size = std::size_t{512} << 20) {
  std::vector<h2d_sample> out;
  for (const auto& r : detail::measure_h2d_rates(device, sizes, bytes_per_size, {}).rates)
    out.push_back(h2d_sample{r.bytes, r.pinned_gbps, r.pageable_gbps});
  return out;
}

// Adds the checks named in gpufeed::gpu_check_names, in that order: gpu.visible, gpu.versions,
// gpu.devices, gpu.nvml, gpu.pcie, gpu.throttle, gpu.h2d.
inline void add_gpu_checks(doctor_report& report, const gpu_check_options& opts = {}) {
  const device_query& q = query();
  const gpufeed::detail::doctor::nvml_api nvml(opts.nvml_library);
  std::vector<detail::gpu_probe> probes;
  detail::probe_options po;
  po.max_devices = opts.max_devices;
  po.measure_h2d = opts.measure_h2d;
  po.sizes = opts.h2d_sizes;
  po.bytes_per_size = opts.h2d_bytes_per_size;
  try {
    probes = detail::probe_gpus(q, nvml, po);
  } catch (const std::exception&) {
    probes.clear();  // probe_gpus records failures per GPU; only allocation failure lands here
  }
  // Each check is built on its own, so one that fails cannot take the others with it.
  auto add = [&report](const char* id, auto&& build) {
    try {
      report.add(build());
    } catch (const std::exception& e) {
      report.add(doctor_check(id, gpu_check_title(id), check_status::fail,
                              std::string("this check failed unexpectedly: ") + e.what()));
    }
  };
  add("gpu.visible", [&] { return detail::visible_check(q, opts.require_gpu); });
  add("gpu.versions", [&] { return detail::versions_check(q, nvml); });
  add("gpu.devices", [&] { return detail::devices_check(q, probes); });
  add("gpu.nvml", [&] { return detail::nvml_check(q, nvml, probes); });
  add("gpu.pcie", [&] { return detail::pcie_check(nvml, probes); });
  add("gpu.throttle", [&] { return detail::throttle_check(nvml, probes); });
  add("gpu.h2d", [&] { return detail::h2d_check(q, probes, opts.measure_h2d); });
}

}  // namespace gpufeed::cuda
