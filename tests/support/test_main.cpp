// doctest main for gpufeed's tests. Built twice: plain, and with GPUFEED_TEST_NEEDS_GPU, where it
// exits with 77 (CTest's SKIP_RETURN_CODE) and says why when no CUDA device can be used. Either
// exits with 77 when the cases that ran passed but some skipped (GPUFEED_SKIP_TEST); with
// GPUFEED_REQUIRE_GPU=1 every skip is a failure instead (test_skip.hpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "test_skip.hpp"

#ifdef GPUFEED_TEST_NEEDS_GPU
#include "gpufeed/cuda/device.hpp"
#endif

int main(int argc, char** argv) {
#ifdef GPUFEED_TEST_NEEDS_GPU
  if (const auto& q = gpufeed::cuda::query(); !q.available) {
    std::printf("SKIPPED: this test needs a CUDA device: %s\n", q.reason.c_str());
    return gpufeed::test::skip_status();
  }
#endif
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  const int rc = ctx.run();
  if (ctx.shouldExit() || rc != 0) return rc;
  if (const int n = gpufeed::test::skipped_cases.load()) {
    std::printf("SKIPPED: %d test case%s could not run here (reasons above)\n", n,
                n == 1 ? "" : "s");
    return gpufeed::test::skip_status();
  }
  return rc;
}
