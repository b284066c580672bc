// gpufeed::cuda — is there a usable GPU, and what is it?
//
// query() turns every way of "no GPU" into a plain answer instead of an exception or a crash:
// no driver loaded (cudaErrorInsufficientDriver with driver version 0 — the CI machines), a driver
// too old for this runtime (cudaErrorInsufficientDriver with a version), a driver without devices
// (cudaErrorNoDevice — containers started without GPU access, CUDA_VISIBLE_DEVICES=""), or any
// other initialisation failure. The result is computed once per process and cached: the answer
// cannot change without restarting the process anyway (the runtime caches it too).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "gpufeed/cuda/check.hpp"

namespace gpufeed::cuda {

struct device_query {
  bool available = false;     // at least one device can run work
  int device_count = 0;
  int driver_version = 0;     // CUDA version the driver supports, e.g. 13000; 0 = no driver
  int runtime_version = 0;    // CUDA runtime this program was built against, e.g. 13000
  int status = 0;             // cudaError_t from cudaGetDeviceCount
  std::string status_name;    // e.g. "cudaErrorNoDevice"
  std::string reason;         // plain words; empty when available
};

// "13.0" from 13000.
inline std::string version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

namespace detail {
inline device_query run_query() noexcept {
  device_query q;
  (void)cudaDriverGetVersion(&q.driver_version);
  (void)cudaRuntimeGetVersion(&q.runtime_version);
  const cudaError_t st = cudaGetDeviceCount(&q.device_count);
  (void)cudaGetLastError();
  q.status = static_cast<int>(st);
  q.status_name = cudaGetErrorName(st);
  if (st == cudaSuccess && q.device_count > 0) {
    q.available = true;
    return q;
  }
  q.device_count = 0;
  const std::string runtime = version_string(q.runtime_version);
  switch (st) {
    case cudaErrorInsufficientDriver:
      if (q.driver_version == 0)
        q.reason = "no NVIDIA driver is loaded on this machine, so there is no GPU to use";
      else
        q.reason = "the NVIDIA driver supports CUDA " + version_string(q.driver_version) +
                   " but this program was built with CUDA " + runtime +
                   "; install a newer driver";
      break;
    case cudaErrorNoDevice:
    case cudaSuccess:  // success with zero devices
      q.reason =
          "the NVIDIA driver is loaded but shows no CUDA device (check CUDA_VISIBLE_DEVICES, "
          "and that a container was started with GPU access, e.g. --gpus all)";
      break;
    default:
      q.reason = std::string("CUDA could not be initialised: ") + cudaGetErrorString(st);
  }
  q.reason += " [cudaGetDeviceCount: " + q.status_name + "]";
  return q;
}
}  // namespace detail

// Cached per process; never throws.
inline const device_query& query() noexcept {
  static const device_query q = detail::run_query();
  return q;
}

inline bool has_device() noexcept { return query().available; }

struct device_properties {
  int id = 0;
  std::string name;
  std::size_t total_memory = 0;
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
  int async_engines = 0;  // copy engines: concurrent copies in flight
  std::string pci_bus_id;  // "0000:17:00.0"
};

// Throws cuda_error for an invalid id or when no device is available.
inline device_properties properties(int id) {
  cudaDeviceProp p{};
  GPUFEED_CUDA_TRY(cudaGetDeviceProperties(&p, id));
  device_properties d;
  d.id = id;
  d.name = p.name;
  d.total_memory = p.totalGlobalMem;
  d.compute_major = p.major;
  d.compute_minor = p.minor;
  d.multiprocessors = p.multiProcessorCount;
  d.async_engines = p.asyncEngineCount;
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, id) == cudaSuccess) d.pci_bus_id = bus;
  (void)cudaGetLastError();
  return d;
}

}  // namespace gpufeed::cuda
