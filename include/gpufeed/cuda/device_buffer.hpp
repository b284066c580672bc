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
#include "gpufeed/detail/unique_handle.hpp"

namespace gpufeed::cuda {

class device_buffer {
  // The allocation and its size move together, so a moved-from buffer is empty (size() == 0).
  struct allocation {
    void* data = nullptr;
    std::size_t bytes = 0;
    bool operator==(const allocation&) const noexcept = default;
  };
  struct free_memory {
    void operator()(allocation a) const noexcept { GPUFEED_CUDA_LOG(cudaFree(a.data)); }
  };

 public:
  device_buffer() noexcept = default;
  // Allocates on the current device.
  explicit device_buffer(std::size_t bytes) {
    if (bytes) {
      void* p = nullptr;
      GPUFEED_CUDA_TRY(cudaMalloc(&p, bytes));
      mem_ = gpufeed::detail::unique_handle<allocation, free_memory>(allocation{p, bytes});
    }
  }

  [[nodiscard]] std::byte* data() const noexcept {
    return static_cast<std::byte*>(mem_.get().data);
  }
  [[nodiscard]] std::size_t size() const noexcept { return mem_.get().bytes; }
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(mem_.get().data);
  }

 private:
  gpufeed::detail::unique_handle<allocation, free_memory> mem_;  // move-only through it
};

}  // namespace gpufeed::cuda
