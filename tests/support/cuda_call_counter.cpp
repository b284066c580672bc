#include "cuda_call_counter.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {
std::atomic<bool> armed{false};
std::atomic<std::uint64_t> syncs{0}, allocations{0};

template <class F>
F real(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) {
    std::fprintf(stderr, "cuda_call_counter: %s not found in the CUDA runtime\n", name);
    std::abort();
  }
  return reinterpret_cast<F>(p);
}
void count(std::atomic<std::uint64_t>& c) noexcept {
  if (armed.load(std::memory_order_relaxed)) c.fetch_add(1);
}
}  // namespace

namespace gpufeed::test {
void arm_cuda_call_counter() noexcept {
  syncs = 0;
  allocations = 0;
  armed = true;
}
cuda_call_counts disarm_cuda_call_counter() noexcept {
  armed = false;
  return {syncs.load(), allocations.load()};
}
}  // namespace gpufeed::test

extern "C" {
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  static auto f = real<cudaError_t (*)(cudaStream_t)>("cudaStreamSynchronize");
  count(syncs);
  return f(s);
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  static auto f = real<cudaError_t (*)(cudaEvent_t)>("cudaEventSynchronize");
  count(syncs);
  return f(e);
}
cudaError_t cudaDeviceSynchronize() {
  static auto f = real<cudaError_t (*)()>("cudaDeviceSynchronize");
  count(syncs);
  return f();
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind k) {
  static auto f = real<cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind)>("cudaMemcpy");
  count(syncs);
  return f(dst, src, n, k);
}
cudaError_t cudaMalloc(void** p, size_t n) {
  static auto f = real<cudaError_t (*)(void**, size_t)>("cudaMalloc");
  count(allocations);
  return f(p, n);
}
cudaError_t cudaFree(void* p) {
  static auto f = real<cudaError_t (*)(void*)>("cudaFree");
  count(allocations);
  return f(p);
}
cudaError_t cudaMallocHost(void** p, size_t n) {
  static auto f = real<cudaError_t (*)(void**, size_t)>("cudaMallocHost");
  count(allocations);
  return f(p, n);
}
cudaError_t cudaFreeHost(void* p) {
  static auto f = real<cudaError_t (*)(void*)>("cudaFreeHost");
  count(allocations);
  return f(p);
}
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned int flags) {
  static auto f = real<cudaError_t (*)(void**, size_t, unsigned int)>("cudaHostAlloc");
  count(allocations);
  return f(p, n, flags);
}
}
