// gpufeed::cuda — move-only owner of a CUDA event.
//
// By default events are created with cudaEventDisableTiming: such events are the cheapest way to
// order work between streams (record on one, cudaStreamWaitEvent on another). Ask for timing only
// where elapsed time is read (telemetry's H2D timings).
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

#include "gpufeed/cuda/check.hpp"

namespace gpufeed::cuda {

class event {
 public:
  enum class timing : bool { disabled = false, enabled = true };

  explicit event(timing t = timing::disabled) {
    GPUFEED_CUDA_TRY(cudaEventCreateWithFlags(
        &handle_, t == timing::enabled ? cudaEventDefault : cudaEventDisableTiming));
  }
  event(event&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  event& operator=(event&& o) noexcept {
    std::swap(handle_, o.handle_);
    return *this;
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() {
    if (handle_) GPUFEED_CUDA_LOG(cudaEventDestroy(handle_));
  }

  [[nodiscard]] cudaEvent_t get() const noexcept { return handle_; }
  operator cudaEvent_t() const noexcept { return handle_; }  // NOLINT: a handle is its value

  void record(cudaStream_t s) const { GPUFEED_CUDA_TRY(cudaEventRecord(handle_, s)); }
  // True once the work captured by the last record() has completed (or if never recorded).
  [[nodiscard]] bool ready() const {
    const cudaError_t s = cudaEventQuery(handle_);
    if (s == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    GPUFEED_CUDA_TRY(s);
    return true;
  }
  void synchronize() const { GPUFEED_CUDA_TRY(cudaEventSynchronize(handle_)); }

  // Milliseconds between two completed, timing-enabled events.
  [[nodiscard]] static float elapsed_ms(const event& start, const event& stop) {
    float ms = 0.0f;
    GPUFEED_CUDA_TRY(cudaEventElapsedTime(&ms, start.handle_, stop.handle_));
    return ms;
  }

 private:
  cudaEvent_t handle_ = nullptr;
};

}  // namespace gpufeed::cuda
