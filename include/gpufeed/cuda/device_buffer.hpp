// gpufeed::cuda — move-only owner of device memory.
//
// Allocated once with cudaMalloc (never managed memory: oversubscribing managed memory can hang
// the GPU). The destructor frees without synchronising the caller beyond what cudaFree itself
// implies; callers must not destroy a buffer that queued work still uses unless the process is
// shutting down that work too (the loader orders this: it synchronises its streams first).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "gpufeed/cuda/check.hpp"

namespace gpufeed::cuda {

class device_buffer {
 public:
  device_buffer() noexcept = default;
  // Allocates on the current device.
  explicit device_buffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes) GPUFEED_CUDA_TRY(cudaMalloc(&data_, bytes));
  }
  device_buffer(device_buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() {
    if (data_) GPUFEED_CUDA_LOG(cudaFree(data_));
  }

  [[nodiscard]] std::byte* data() const noexcept { return static_cast<std::byte*>(data_); }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace gpufeed::cuda
