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

namespace gpufeed::cuda {

class stream {
 public:
  // priority: lower numbers are higher priority (see cudaDeviceGetStreamPriorityRange); 0 is the
  // default priority.
  explicit stream(int priority = 0) {
    GPUFEED_CUDA_TRY(cudaStreamCreateWithPriority(&handle_, cudaStreamNonBlocking, priority));
  }
  stream(stream&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  stream& operator=(stream&& o) noexcept {
    std::swap(handle_, o.handle_);  // o's destructor releases our old handle
    return *this;
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() {
    if (handle_) GPUFEED_CUDA_LOG(cudaStreamDestroy(handle_));
  }

  [[nodiscard]] cudaStream_t get() const noexcept { return handle_; }
  operator cudaStream_t() const noexcept { return handle_; }  // NOLINT: a handle is its value

  void synchronize() const { GPUFEED_CUDA_TRY(cudaStreamSynchronize(handle_)); }
  // True when all work queued so far has completed.
  [[nodiscard]] bool idle() const {
    const cudaError_t s = cudaStreamQuery(handle_);
    if (s == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    GPUFEED_CUDA_TRY(s);
    return true;
  }
  // Later work on this stream waits for e (no host synchronisation).
  void wait(cudaEvent_t e) const { GPUFEED_CUDA_TRY(cudaStreamWaitEvent(handle_, e, 0)); }

 private:
  cudaStream_t handle_ = nullptr;
};

}  // namespace gpufeed::cuda
