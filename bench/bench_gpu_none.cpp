// gpufeed-bench without CUDA kernels: built when nvcc (or the cuda component) is missing.
#include "bench_gpu.hpp"

namespace bench {

std::unique_ptr<gpu> open_gpu(int, std::string& why) {
  why = "this gpufeed-bench was built without CUDA kernels (no nvcc, or no CUDA Toolkit): "
        "host target only";
  return nullptr;
}

}  // namespace bench
