// Counts the CUDA runtime calls that block the host or allocate, made by this executable while
// armed. The definitions (cuda_call_counter.cpp) interpose the shared runtime's entry points:
// calls compiled into the executable — gpufeed is header-only, so all of its calls — resolve to
// them first, and they forward to libcudart through dlsym(RTLD_NEXT).
#pragma once

#include <cstdint>

namespace gpufeed::test {

struct cuda_call_counts {
  std::uint64_t syncs = 0;        // cudaStreamSynchronize, cudaEventSynchronize,
                                  // cudaDeviceSynchronize, synchronous cudaMemcpy
  std::uint64_t allocations = 0;  // cudaMalloc, cudaFree, cudaMallocHost, cudaFreeHost,
                                  // cudaHostAlloc
};

void arm_cuda_call_counter() noexcept;
cuda_call_counts disarm_cuda_call_counter() noexcept;

}  // namespace gpufeed::test
