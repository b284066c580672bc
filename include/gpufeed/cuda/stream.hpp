// gpufeed::cuda — move-only owner of a CUDA stream.
//
// Streams are created non-blocking (cudaStreamNonBlocking): they never implicitly synchronise
// with the legacy default stream, so a user's kernels on stream 0 cannot serialise the
// pipeline's copies. The destructor never throws; work still queued on the stream completes
// (cudaStreamDestroy returns at once and the device finishes it).
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/detail/unique_handle.hpp"

namespace gpufeed::cuda {

class stream {
  struct destroy {
    void operator()(cudaStream_t s) const noexcept { GPUFEED_CUDA_LOG(cudaStreamDestroy(s)); }
  };

 public:
  // priority: lower numbers are higher priority (see cudaDeviceGetStreamPriorityRange); 0 is the
  // default priority.
  explicit stream(int priority = 0) {
    GPUFEED_CUDA_TRY(
        cudaStreamCreateWithPriority(handle_.out(), cudaStreamNonBlocking, priority));
  }

  [[nodiscard]] cudaStream_t get() const noexcept { return handle_.get(); }
  operator cudaStream_t() const noexcept { return get(); }  // NOLINT: a handle is its value

  void synchronize() const { GPUFEED_CUDA_TRY(cudaStreamSynchronize(get())); }
  // True when all work queued so far has completed.
  [[nodiscard]] bool idle() const {
    const cudaError_t s = cudaStreamQuery(get());
    if (s == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    GPUFEED_CUDA_TRY(s);
    return true;
  }
  // Later work on this stream waits for e (no host synchronisation).
  void wait(cudaEvent_t e) const { GPUFEED_CUDA_TRY(cudaStreamWaitEvent(get(), e, 0)); }

 private:
  gpufeed::detail::unique_handle<cudaStream_t, destroy> handle_;  // move-only through it
};

}  // namespace gpufeed::cuda
