// Cross-stream ordering through events, without host synchronisation: the pattern the loader's
// ready/consumed hand-off relies on.
#include <doctest/doctest.h>

#include <vector>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/event.hpp"
#include "gpufeed/cuda/stream.hpp"

using namespace gpufeed;

namespace {
// Spins for roughly `cycles` then writes value: slow enough that an unordered reader would see
// the old contents.
__global__ void slow_write(int* p, int n, int value, long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = value;
}
__global__ void copy_plus_one(const int* in, int* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = in[i] + 1;
}
}  // namespace

TEST_CASE("a stream waiting on another stream's event sees its writes") {
  constexpr int n = 1 << 20;
  cuda::device_buffer a(n * sizeof(int)), b(n * sizeof(int));
  GPUFEED_CUDA_TRY(cudaMemset(a.data(), 0, n * sizeof(int)));
  GPUFEED_CUDA_TRY(cudaDeviceSynchronize());
  cuda::stream producer, consumer;
  cuda::event ready;
  slow_write<<<64, 256, 0, producer>>>(a.as<int>(), n, 41, 50'000'000);  // ~25 ms
  GPUFEED_CUDA_TRY(cudaGetLastError());
  ready.record(producer);
  consumer.wait(ready);
  copy_plus_one<<<64, 256, 0, consumer>>>(a.as<int>(), b.as<int>(), n);
  GPUFEED_CUDA_TRY(cudaGetLastError());
  consumer.synchronize();
  std::vector<int> host(n);
  GPUFEED_CUDA_TRY(cudaMemcpy(host.data(), b.data(), n * sizeof(int), cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int v : host) wrong += v != 42;
  CHECK(wrong == 0);
}
