// gpufeed::cuda — device_guard: makes a device current on the calling thread for its lifetime.
#pragma once

#include <cuda_runtime_api.h>

#include "gpufeed/cuda/check.hpp"

namespace gpufeed::cuda {

// Makes `device` current on the calling thread for the guard's lifetime (the CUDA device is
// per-thread state, and workers, the consumer and the engine's callers are different threads).
class device_guard {
 public:
  explicit device_guard(int device) {
    GPUFEED_CUDA_TRY(cudaGetDevice(&previous_));
    if (previous_ != device) GPUFEED_CUDA_TRY(cudaSetDevice(device));
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard() {
    int now = previous_;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_)
      GPUFEED_CUDA_LOG(cudaSetDevice(previous_));
  }

 private:
  int previous_ = 0;
};

}  // namespace gpufeed::cuda
