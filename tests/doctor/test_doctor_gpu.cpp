// The GPU checks on a real GPU: visible, versions fit, the device described, copy rates measured
// for every size with pinned faster than pageable, and measure_h2d's own contract.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device.hpp"
#include "gpufeed/cuda/doctor/gpu_checks.hpp"

using namespace gpufeed;

namespace {
double number(const doctor_check& c, const std::string& key) {
  for (const auto& [k, v] : c.numbers)
    if (k == key) return v;
  FAIL_CHECK("no number " << key << " in " << c.id);
  return -1.0;
}
bool pass_or_warn(check_status s) { return s == check_status::pass || s == check_status::warn; }
}  // namespace

TEST_CASE("GPU checks pass or warn on a GPU machine; pinned beats pageable") {
  cuda::gpu_check_options o;
  o.max_devices = 1;  // one GPU is enough to test; the doctor measures all by default
  doctor_report r;
  cuda::add_gpu_checks(r, o);
  MESSAGE(r.to_text());
  REQUIRE(r.checks.size() == std::size(gpu_check_names));

  CHECK(r.find("gpu.visible")->status == check_status::pass);
  CHECK(pass_or_warn(r.find("gpu.versions")->status));
  CHECK(r.find("gpu.devices")->status == check_status::pass);
  CHECK(number(*r.find("gpu.devices"), "gpu0_memory_bytes") > 0.0);
  // NVML may be absent on the test machine: skip is fine there, failure is not.
  for (const char* id : {"gpu.nvml", "gpu.pcie", "gpu.throttle"})
    CHECK_MESSAGE(r.find(id)->status != check_status::fail, id << ": " << r.find(id)->summary);

  const auto& h2d = *r.find("gpu.h2d");
  REQUIRE_MESSAGE(pass_or_warn(h2d.status), h2d.summary);
  for (const std::size_t bytes : o.h2d_sizes) {
    const double pinned = number(h2d, "gpu0_pinned_gbps_" + std::to_string(bytes));
    const double pageable = number(h2d, "gpu0_pageable_gbps_" + std::to_string(bytes));
    CHECK(pinned > 0.0);
    CHECK(pageable > 0.0);
  }
  // The one rate comparison this suite makes: on the H200 machine pinned 256 MiB copies reach
  // ~53 GB/s and pageable ones 5-10 GB/s, a margin no noise closes.
  CHECK(number(h2d, "gpu0_pinned_gbps_268435456") > number(h2d, "gpu0_pageable_gbps_268435456"));
  CHECK(h2d.summary.find("pinned copies reach") != std::string::npos);

  const auto j = nlohmann::json::parse(r.to_json_string());
  CHECK(j.at("checks").size() == std::size(gpu_check_names));
}

TEST_CASE("measure_h2d: one sample per size, in order, positive; device restored") {
  int before = -1;
  GPUFEED_CUDA_TRY(cudaGetDevice(&before));
  const auto s = cuda::measure_h2d(0, {std::size_t{1} << 20, std::size_t{64} << 10}, std::size_t{64} << 20);
  REQUIRE(s.size() == 2);
  CHECK(s[0].bytes == std::size_t{1} << 20);
  CHECK(s[1].bytes == std::size_t{64} << 10);
  for (const auto& x : s) {
    CHECK(x.pinned_gbps > 0.0);
    CHECK(x.pageable_gbps > 0.0);
  }
  int after = -1;
  GPUFEED_CUDA_TRY(cudaGetDevice(&after));
  CHECK(after == before);
  CHECK_THROWS_AS(cuda::measure_h2d(0, {}), config_error);
  CHECK_THROWS_AS(cuda::measure_h2d(0, {std::size_t{0}}), config_error);
  CHECK_THROWS_AS(cuda::measure_h2d(cuda::query().device_count, {std::size_t{4096}}), cuda_error);
}

TEST_CASE("without NVML the copy verdict still stands, without the link percentage") {
  cuda::gpu_check_options o;
  o.max_devices = 1;
  o.nvml_library = "libnvidia-ml-gpufeed-missing.so.1";
  o.h2d_sizes = {std::size_t{16} << 20};
  o.h2d_bytes_per_size = std::size_t{128} << 20;
  doctor_report r;
  cuda::add_gpu_checks(r, o);
  const auto& h2d = *r.find("gpu.h2d");
  CHECK(pass_or_warn(h2d.status));
  CHECK(h2d.summary.find("unknown without NVML") != std::string::npos);
  CHECK(r.find("gpu.pcie")->status == check_status::skip);
}
