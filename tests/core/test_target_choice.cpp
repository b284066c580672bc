// gpufeed::device_or_host() in a program built without the CUDA component: it compiles with no
// CUDA header and gives the host target, saying why. (With gpufeed::cuda it is
// cuda::device_or_host(): tests/cuda/test_cuda_nodevice.cpp.)
#include <doctest/doctest.h>

#include <string>

#include "gpufeed/loader_config.hpp"
#include "gpufeed/target_choice.hpp"

#if defined(GPUFEED_HAS_CUDA) || defined(__CUDACC__)
#error "this test must be built without the CUDA component"
#endif

TEST_CASE("device_or_host without CUDA: the host target, and the reason") {
  static_assert(!gpufeed::built_with_cuda);
  std::string why;
  const gpufeed::target t = gpufeed::device_or_host(0, &why);
  CHECK(t.is_host());
  CHECK(t.device() == -1);
  CHECK(t.name() == "host");
  CHECK(why == gpufeed::built_without_cuda);
  CHECK(why.find("built without CUDA") != std::string::npos);
  CHECK(gpufeed::device_or_host().is_host());  // the reason is optional

  gpufeed::loader_config c;
  c.target = gpufeed::device_or_host(1);
  CHECK(c.target.is_host());
}
