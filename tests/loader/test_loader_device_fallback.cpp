// Device targets without a device: plain answers, typed errors, host fallback.
#include <doctest/doctest.h>

#include <string>

#include "gpufeed/cuda/device_target.hpp"
#include "gpufeed/loader.hpp"
#include "memory_source.hpp"

using namespace gpufeed;

TEST_CASE("device_or_host falls back to the host target with the plain reason") {
  std::string why;
  const target t = cuda::device_or_host(0, &why);
  if (cuda::has_device()) {
    CHECK_FALSE(t.is_host());
    CHECK(t.device() == 0);
    CHECK(t.name() == "cuda:0");
    const target missing = cuda::device_or_host(999, &why);
    CHECK(missing.is_host());
    CHECK(why.find("does not exist") != std::string::npos);
  } else {
    CHECK(t.is_host());
    CHECK(why == cuda::query().reason);
    CHECK_THROWS_AS(cuda::device(0), cuda_error);
    try {
      (void)cuda::device(0);
    } catch (const cuda_error& e) {
      CHECK(std::string(e.what()).find(cuda::query().reason) != std::string::npos);
    }
  }
}

TEST_CASE("a loader built on the fallback target delivers on the host") {
  test::memory_source src(64, 8);
  loader_config c;
  c.batch_size = 16;
  c.part = partition{};
  c.epochs = 1;
  c.target = cuda::device_or_host(0);
  loader<test::memory_source> l(src, c);
  int n = 0;
  while (auto b = l.next()) {
    CHECK(b->on_device() == !c.target.is_host());
    ++n;
  }
  CHECK(n == 4);
}
