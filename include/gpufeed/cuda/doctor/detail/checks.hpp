// The GPU doctor's checks, worded from what probe.hpp gathered. Each function returns one
// check with the id and title listed in gpufeed::gpu_check_names.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gpufeed/cuda/doctor/detail/probe.hpp"
#include "gpufeed/cuda/device.hpp"
#include "gpufeed/doctor/detail/device_files.hpp"
#include "gpufeed/doctor/detail/format.hpp"
#include "gpufeed/doctor/detail/nvml.hpp"
#include "gpufeed/doctor/doctor.hpp"

namespace gpufeed::cuda::detail {

inline doctor_check make_check(const char* id) { return doctor_check(id, gpu_check_title(id)); }

inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? (*v ? std::string(v) : std::string("(set, empty)")) : std::string(fallback);
}

// The oldest Linux driver branch that supports a CUDA major version.
inline std::string min_driver_for(int cuda_version) {
  switch (cuda_version / 1000) {
    case 11: return "r450";
    case 12: return "r525";
    case 13: return "r580";
    default: return "a newer driver";
  }
}

inline doctor_check visible_check(const device_query& q, bool require_gpu) {
  doctor_check c = make_check("gpu.visible");
  c.fact("CUDA_VISIBLE_DEVICES", env_or("CUDA_VISIBLE_DEVICES", "(not set)"));
  c.number("devices", q.device_count);
  if (q.available) {
    c.status = check_status::pass;
    c.summary = std::to_string(q.device_count) + (q.device_count == 1 ? " GPU is" : " GPUs are") +
                " visible to CUDA";
    return c;
  }
  // No driver at all is a machine without a GPU (gpufeed then works in host memory); a driver
  // that is there but unusable is a broken GPU machine.
  c.status = (q.driver_version == 0 && !require_gpu) ? check_status::warn : check_status::fail;
  c.summary = q.reason;
  c.fact("cudaGetDeviceCount", q.status_name);
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  switch (static_cast<cudaError_t>(q.status)) {
    case cudaErrorInsufficientDriver:
      c.hint = q.driver_version == 0
                   ? "install the NVIDIA driver; in a container, start it with GPU access "
                     "(`--gpus all`) so the driver's libraries are mounted. Until then gpufeed "
                     "delivers batches in host memory"
                   : "install the " + min_driver_for(q.runtime_version) + " driver or newer";
      break;
    case cudaErrorNoDevice:
      c.hint = cvd ? "CUDA_VISIBLE_DEVICES='" + std::string(cvd) +
                         "' hides every GPU: unset it or list valid GPU indices or UUIDs"
                   : "see the device-files check: the GPU device files must exist and be usable";
      break;
    case cudaErrorSystemDriverMismatch:
      c.hint = "the NVIDIA kernel module and user-space libraries are different versions: reboot "
               "(or reload the nvidia modules) after a driver update";
      break;
    case cudaErrorDevicesUnavailable:
      c.hint = "the GPUs are in exclusive-process compute mode and busy with another process "
               "(`nvidia-smi -q -d COMPUTE`)";
      break;
    default:
      c.hint = "often a missing /dev/nvidia-uvm (`nvidia-modprobe -u -c 0` as root), a GPU in a "
               "bad state (look for 'Xid' in `dmesg`), or a driver/library mismatch";
  }
  return c;
}

inline doctor_check versions_check(const device_query& q, const dd::nvml_api& nvml) {
  doctor_check c = make_check("gpu.versions");
  std::string driver = nvml.driver_version().value_or("");
  if (driver.empty()) driver = dd::kernel_module_version("/proc");
  const std::string runtime = version_string(q.runtime_version);
  c.fact("driver", driver.empty() ? "version unknown" : driver);
  c.fact("CUDA version the driver supports", q.driver_version ? version_string(q.driver_version) : "none (no driver)");
  c.fact("CUDA runtime this program was built with", runtime);
  c.number("driver_cuda_version", q.driver_version);
  c.number("runtime_cuda_version", q.runtime_version);
  const std::string drv = "the driver" + (driver.empty() ? std::string() : " " + driver) + " (CUDA " +
                          version_string(q.driver_version) + ")";
  if (q.driver_version == 0) {
    c.summary = "no NVIDIA driver, so there is nothing to compare with the CUDA " + runtime + " runtime";
  } else if (q.driver_version >= q.runtime_version) {
    c.status = check_status::pass;
    c.summary = drv + " supports this program's CUDA " + runtime + " runtime";
  } else if (q.driver_version / 1000 == q.runtime_version / 1000 && q.available) {
    c.status = check_status::warn;
    c.summary = drv + " is older than this program's CUDA " + runtime +
                " runtime; it runs through CUDA's minor-version compatibility, but features newer "
                "than the driver fail";
    c.hint = "update the driver to one that supports CUDA " + runtime;
  } else {
    c.status = check_status::fail;
    c.summary = drv + " cannot run this program's CUDA " + runtime + " runtime";
    c.hint = "install the " + min_driver_for(q.runtime_version) + " driver or newer";
  }
  return c;
}

inline doctor_check devices_check(const device_query& q, const std::vector<gpu_probe>& probes) {
  doctor_check c = make_check("gpu.devices");
  if (!q.available) {
    c.summary = "no GPU visible to CUDA: nothing to describe";
    return c;
  }
  c.status = check_status::pass;
  std::string names;
  for (const auto& p : probes) {
    const std::string key = "GPU " + std::to_string(p.cuda_id);
    if (!p.props) {
      c.status = check_status::fail;
      c.fact(key, "could not be queried: " + p.error);
      continue;
    }
    const auto& d = *p.props;
    c.fact(key, d.name + ", " + dd::bytes(d.total_memory) + " (" + dd::bytes(p.free_memory) +
                    " free), compute capability " + std::to_string(d.compute_major) + "." +
                    std::to_string(d.compute_minor) + ", " + std::to_string(d.multiprocessors) +
                    " SMs, " + std::to_string(d.async_engines) + " copy engines, PCI " + d.pci_bus_id);
    const std::string n = "gpu" + std::to_string(p.cuda_id) + "_";
    c.number(n + "memory_bytes", static_cast<double>(d.total_memory));
    c.number(n + "free_memory_bytes", static_cast<double>(p.free_memory));
    c.number(n + "compute_capability", d.compute_major + d.compute_minor / 10.0);
    names += (names.empty() ? "" : "; ") + key + ": " + d.name + ", " + dd::bytes(d.total_memory) +
             ", compute " + std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor);
  }
  c.summary = c.status == check_status::pass ? names : "a GPU could not be queried (see facts)";
  return c;
}

// Why the PCIe and throttle checks cannot run, or "" when NVML is usable.
inline std::string nvml_unavailable(const dd::nvml_api& nvml) {
  if (nvml.ok()) return {};
  if (!nvml.found()) return "NVML not found (" + nvml.library() + "): PCIe and throttle checks skipped";
  return nvml.error() + ": PCIe and throttle checks skipped";
}

inline doctor_check nvml_check(const device_query& q, const dd::nvml_api& nvml,
                               const std::vector<gpu_probe>& probes) {
  doctor_check c = make_check("gpu.nvml");
  c.fact("library", nvml.library());
  if (!nvml.ok()) {
    c.summary = nvml_unavailable(nvml);
    if (!nvml.found()) {
      c.fact("dlopen", nvml.dlopen_error());
      c.hint = "NVML (libnvidia-ml.so.1) comes with the NVIDIA driver; in a container the NVIDIA "
               "Container Toolkit mounts it when NVIDIA_DRIVER_CAPABILITIES includes 'utility'";
    } else {
      // A driver/library mismatch breaks CUDA too; other start failures (no driver) are the
      // GPU-visible check's business.
      c.status = nvml.init_status() == dd::nvml_error_lib_rm_version_mismatch ? check_status::fail
                                                                              : check_status::warn;
    }
    return c;
  }
  const unsigned n = nvml.device_count().value_or(0);
  c.status = check_status::pass;
  c.fact("driver", nvml.driver_version().value_or("unknown"));
  c.number("devices", n);
  c.summary = "NVML is loaded and sees " + std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
  if (!q.available && n > 0) {
    c.status = check_status::warn;
    c.summary += ", but CUDA sees none (see the GPU-visible check for why)";
  }
  for (const auto& p : probes)
    if (p.cuda_id >= 0 && p.props && !p.nvml)
      c.fact(p.label, "not found by NVML at PCI bus id " + p.props->pci_bus_id);
  return c;
}

}  // namespace gpufeed::cuda::detail
