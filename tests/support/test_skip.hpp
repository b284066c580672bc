// Skipping a test case at run time, visibly: GPUFEED_SKIP_TEST(reason) prints the reason, records
// the skip and leaves the test case. A program in which every case passed but one was skipped
// exits with 77 (CTest's SKIP_RETURN_CODE), not 0, so a skip never reads as a pass. With
// GPUFEED_REQUIRE_GPU=1 (set by scripts/gpu-run.sh on the GPU machine) a skip is a failure (exit 1):
// there, a test that cannot run — no device visible, device memory taken — is a broken machine.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpufeed::test {

inline std::atomic<int> skipped_cases{0};

// True when GPUFEED_REQUIRE_GPU=1: skips fail.
inline bool skips_fail() noexcept {
  const char* v = std::getenv("GPUFEED_REQUIRE_GPU");
  return v && std::strcmp(v, "1") == 0;
}

// The exit status of a program that had to skip (reason already printed).
inline int skip_status() noexcept {
  if (skips_fail()) {
    std::printf("FAILED: GPUFEED_REQUIRE_GPU=1, so a skipped test is a failure\n");
    return 1;
  }
  return 77;
}

}  // namespace gpufeed::test

#define GPUFEED_SKIP_TEST(reason)                                   \
  do {                                                              \
    ::gpufeed::test::skipped_cases.fetch_add(1);                    \
    MESSAGE("SKIPPED: " << reason);                                 \
    return;                                                         \
  } while (0)
