// gpufeed::cuda — move-only owner of device memory.
//
// Allocated once with cudaMalloc (never managed memory: oversubscribing managed memory can hang
// the GPU). The destructor frees without synchronising the caller beyond what cudaFree itself
// implies; callers must not destroy a buffer that queued work still uses unless the process is
// shutting down that work too (the loader orders this: it synchronises its streams first).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/detail/memory_block.hpp"

namespace gpufeed::cuda {

class device_buffer : public detail::memory_block<cudaFree, detail::cuda_free_name> {
 public:
  device_buffer() noexcept = default;
  // Allocates on the current device.
  explicit device_buffer(std::size_t bytes) {
    if (bytes) {
      void* p = nullptr;
      GPUFEED_CUDA_TRY(cudaMalloc(&p, bytes));
      memory_block::operator=(memory_block(p, bytes));
    }
  }

  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return reinterpret_cast<T*>(data());
  }
};

}  // namespace gpufeed::cuda
