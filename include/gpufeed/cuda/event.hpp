// gpufeed::cuda — move-only owner of a CUDA event.
//
// By default events are created with cudaEventDisableTiming: such events are the cheapest way to
// order work between streams (record on one, cudaStreamWaitEvent on another). Ask for timing only
// where elapsed time is read (telemetry's H2D timings).
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/detail/unique_handle.hpp"

namespace gpufeed::cuda {

class event {
  struct destroy {
    void operator()(cudaEvent_t e) const noexcept { GPUFEED_CUDA_LOG(cudaEventDestroy(e)); }
  };

 public:
  enum class timing : bool { disabled = false, enabled = true };

  explicit event(timing t = timing::disabled) {
    GPUFEED_CUDA_TRY(cudaEventCreateWithFlags(
        handle_.out(), t == timing::enabled ? cudaEventDefault : cudaEventDisableTiming));
  }

  [[nodiscard]] cudaEvent_t get() const noexcept { return handle_.get(); }
  operator cudaEvent_t() const noexcept { return get(); }  // NOLINT: a handle is its value

  void record(cudaStream_t s) const { GPUFEED_CUDA_TRY(cudaEventRecord(get(), s)); }
  // True once the work captured by the last record() has completed (or if never recorded).
  [[nodiscard]] bool ready() const {
    const cudaError_t s = cudaEventQuery(get());
    if (s == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    GPUFEED_CUDA_TRY(s);
    return true;
  }
  void synchronize() const { GPUFEED_CUDA_TRY(cudaEventSynchronize(get())); }

  // Milliseconds between two completed, timing-enabled events.
  [[nodiscard]] static float elapsed_ms(const event& start, const event& stop) {
    float ms = 0.0f;
    GPUFEED_CUDA_TRY(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    return ms;
  }

 private:
  gpufeed::detail::unique_handle<cudaEvent_t, destroy> handle_;  // move-only through it
};

}  // namespace gpufeed::cuda
