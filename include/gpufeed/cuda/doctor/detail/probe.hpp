// The GPU doctor's data gathering: what CUDA and NVML say about each GPU, the PCIe link at idle
// and under a copy, and the copy rates. The wording lives in checks.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpufeed/cuda/doctor/detail/h2d.hpp"
#include "gpufeed/cuda/device.hpp"
#include "gpufeed/doctor/detail/nvml.hpp"

namespace gpufeed::cuda::detail {

namespace dd = gpufeed::detail::doctor;

struct link_reading {
  std::optional<unsigned> generation, width;
  std::optional<unsigned long long> clock_reasons;
};

// One GPU: a CUDA device (cuda_id >= 0), or, when CUDA sees none, a GPU only NVML sees.
struct gpu_probe {
  int cuda_id = -1;
  unsigned nvml_index = 0;
  std::string label;                 // "GPU 0 (<device name>)"
  std::optional<device_properties> props;
  std::size_t free_memory = 0;
  std::string error;                 // why props / memory could not be read
  dd::nvml_device nvml = nullptr;    // null: NVML absent or did not find this GPU
  std::optional<unsigned> max_generation, max_width, gpu_max_generation;
  link_reading idle, busy;
  bool busy_confirmed = false;       // busy was read while copies were in flight
  std::vector<h2d_rate> h2d;
  std::string h2d_error;
};

inline void read_link(const dd::nvml_api& nvml, dd::nvml_device d, link_reading& r) {
  r.generation = nvml.curr_link_generation(d);
  r.width = nvml.curr_link_width(d);
  r.clock_reasons = nvml.clock_reasons(d);
}

inline void read_link_limits(const dd::nvml_api& nvml, gpu_probe& p) {
  p.max_generation = nvml.max_link_generation(p.nvml);
  p.max_width = nvml.max_link_width(p.nvml);
  p.gpu_max_generation = nvml.gpu_max_link_generation(p.nvml);
  read_link(nvml, p.nvml, p.idle);
}

struct probe_options {
  int max_devices = -1;
  bool measure_h2d = true;
  std::vector<std::size_t> sizes;
  std::size_t bytes_per_size = 0;
};

// Probes every CUDA device (up to max_devices), or, when CUDA has none, every GPU NVML sees.
// Never throws: a failure is recorded in the probe it concerns.
inline std::vector<gpu_probe> probe_gpus(const device_query& q, const dd::nvml_api& nvml,
                                         const probe_options& o) {
  std::vector<gpu_probe> probes;
  if (!q.available) {
    const unsigned n = nvml.device_count().value_or(0);
    for (unsigned i = 0; i < n && (o.max_devices < 0 || i < static_cast<unsigned>(o.max_devices)); ++i) {
      gpu_probe p;
      p.nvml_index = i;
      p.nvml = nvml.by_index(i);
      p.label = "NVML GPU " + std::to_string(i) + " (" + nvml.name(p.nvml).value_or("unnamed") + ")";
      if (p.nvml) read_link_limits(nvml, p);
      probes.push_back(std::move(p));
    }
    return probes;
  }
  for (int d = 0; d < q.device_count && (o.max_devices < 0 || d < o.max_devices); ++d) {
    gpu_probe p;
    p.cuda_id = d;
    p.label = "GPU " + std::to_string(d);
    try {
      p.props = properties(d);
      p.label += " (" + p.props->name + ")";
      const current_device_guard guard(d);
      std::size_t free = 0, total = 0;
      GPUFEED_CUDA_TRY(cudaMemGetInfo(&free, &total));
      p.free_memory = free;
      if (!p.props->pci_bus_id.empty()) p.nvml = nvml.by_pci_bus_id(p.props->pci_bus_id);
    } catch (const std::exception& e) {
      p.error = e.what();
    }
    if (p.nvml) read_link_limits(nvml, p);
    if (o.measure_h2d && p.error.empty()) {
      try {
        std::function<void()> while_busy;
        if (p.nvml) while_busy = [&nvml, &p] { read_link(nvml, p.nvml, p.busy); };
        h2d_run run = measure_h2d_rates(d, o.sizes, o.bytes_per_size, while_busy);
        p.h2d = std::move(run.rates);
        p.busy_confirmed = run.busy_confirmed;
      } catch (const std::exception& e) {
        p.h2d_error = e.what();
      }
    }
    probes.push_back(std::move(p));
  }
  return probes;
}

}  // namespace gpufeed::cuda::detail
