// The CUDA layer's host-side behaviour, valid with or without a GPU.
#include <doctest/doctest.h>

#include <string>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device.hpp"
#include "gpufeed/cuda/nvtx.hpp"
#include "gpufeed/target_choice.hpp"

using namespace gpufeed;

TEST_CASE("device query answers in plain words and never throws") {
  const auto& q = cuda::query();
  CHECK(&q == &cuda::query());  // computed once
  CHECK(q.runtime_version >= 13000);
  if (q.available) {
    CHECK(q.device_count >= 1);
    CHECK(q.reason.empty());
    MESSAGE("CUDA device available: " << q.device_count << " device(s), driver "
                                      << cuda::version_string(q.driver_version));
  } else {
    CHECK(q.device_count == 0);
    CHECK_FALSE(q.reason.empty());
    CHECK(q.reason.find("cudaGetDeviceCount") != std::string::npos);
    if (q.driver_version == 0) CHECK(q.reason.find("no NVIDIA driver") != std::string::npos);
    MESSAGE("no CUDA device: " << q.reason);
  }
}

TEST_CASE("GPUFEED_CUDA_TRY throws cuda_error with API, status and call site") {
  try {
    GPUFEED_CUDA_TRY(cudaErrorInvalidValue);
    FAIL("expected cuda_error");
  } catch (const cuda_error& e) {
    CHECK(e.api() == "cudaErrorInvalidValue");
    CHECK(e.status() == static_cast<long long>(cudaErrorInvalidValue));
    CHECK(e.context().status_text == "cudaErrorInvalidValue");
    // The call site is kept in context() in every build; what() shows it only in a debug build
    // or with GPUFEED_ERROR_LOCATIONS set.
    REQUIRE(e.context().where.has_value());
    CHECK(std::string(e.context().where->file_name()).find("test_cuda_nodevice.cpp") !=
          std::string::npos);
  }
  CHECK_NOTHROW(GPUFEED_CUDA_TRY(cudaSuccess));
}

TEST_CASE("GPUFEED_CUDA_LOG never throws, and is silent at runtime unload") {
  CHECK_NOTHROW(GPUFEED_CUDA_LOG(cudaErrorInvalidValue));
  CHECK_NOTHROW(GPUFEED_CUDA_LOG(cudaErrorCudartUnloading));
}

TEST_CASE("the device query's own failure is reported as a typed error when checked") {
  int count = 0;
  const cudaError_t st = cudaGetDeviceCount(&count);
  if (st != cudaSuccess) {
    // Initialisation failures are sticky for the process: every later call reports them too.
    CHECK_THROWS_AS(GPUFEED_CUDA_TRY(cudaGetDeviceCount(&count)), cuda_error);
    CHECK_FALSE(cuda::has_device());
  } else {
    CHECK(cuda::has_device() == (count > 0));
  }
}

TEST_CASE("version_string") {
  CHECK(cuda::version_string(13000) == "13.0");
  CHECK(cuda::version_string(12080) == "12.8");
}

TEST_CASE("NVTX ranges are harmless without a tool attached") {
  cuda::name_current_thread("gpufeed test");
  cuda::nvtx_range outer("outer");
  { cuda::nvtx_range inner("inner", 0xffff0000u); }
}

TEST_CASE("gpufeed::device_or_host with the CUDA component is cuda::device_or_host") {
  static_assert(gpufeed::built_with_cuda);
  std::string why, cuda_why;
  const gpufeed::target t = gpufeed::device_or_host(0, &why);
  const gpufeed::target c = gpufeed::cuda::device_or_host(0, &cuda_why);
  CHECK(t.is_host() == c.is_host());
  CHECK(t.name() == c.name());
  CHECK(why == cuda_why);
  if (t.is_host()) {
    CHECK_FALSE(why.empty());
    CHECK(why != gpufeed::built_without_cuda);
  }
}
