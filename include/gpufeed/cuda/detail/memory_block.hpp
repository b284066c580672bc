// gpufeed::cuda::detail — the move-only owner both device_buffer and pinned_buffer are: one
// CUDA allocation and its size, released by `Free` (cudaFree or cudaFreeHost) exactly once.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/detail/unique_handle.hpp"

namespace gpufeed::cuda::detail {

// `Free` is the CUDA call that releases the memory; `FreeName` its name, for the log line a
// failing release prints (destructors never throw).
template <cudaError_t (*Free)(void*), const char* FreeName>
class memory_block {
  // The pointer and its size move together, so a moved-from block is empty (size() == 0).
  struct allocation {
    void* data = nullptr;
    std::size_t bytes = 0;
    bool operator==(const allocation&) const noexcept = default;
  };
  struct release {
    void operator()(allocation a) const noexcept { log_failure(Free(a.data), FreeName); }
  };

 public:
  memory_block() noexcept = default;
  // Takes ownership of `bytes` bytes at `data`, allocated by the call `Free` undoes.
  memory_block(void* data, std::size_t bytes) noexcept
      : mem_(allocation{data, bytes}) {}

  [[nodiscard]] std::byte* data() const noexcept {
    return static_cast<std::byte*>(mem_.get().data);
  }
  [[nodiscard]] std::size_t size() const noexcept { return mem_.get().bytes; }

 private:
  gpufeed::detail::unique_handle<allocation, release> mem_;  // move-only through it
};

inline constexpr char cuda_free_name[] = "cudaFree";
inline constexpr char cuda_free_host_name[] = "cudaFreeHost";

}  // namespace gpufeed::cuda::detail
