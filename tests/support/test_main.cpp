// doctest main for gpufeed's tests. Built twice: plain, and with GPUFEED_TEST_NEEDS_GPU, where it
// exits with 77 (CTest's SKIP_RETURN_CODE) and says why when no CUDA device can be used.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#ifdef GPUFEED_TEST_NEEDS_GPU
#include "gpufeed/cuda/device.hpp"
#endif

int main(int argc, char** argv) {
#ifdef GPUFEED_TEST_NEEDS_GPU
  if (const auto& q = gpufeed::cuda::query(); !q.available) {
    std::printf("SKIPPED: this test needs a CUDA device: %s\n", q.reason.c_str());
    return 77;
  }
#endif
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  return ctx.run();
}
