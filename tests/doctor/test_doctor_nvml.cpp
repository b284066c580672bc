// The doctor's NVML loader (missing, fake, failing), throttle-reason decoding, PCIe arithmetic and
// number words, and the skipped GPU checks of a build without CUDA. Host-only.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstdint>
#include <string>

#include "fake_nvml_path.hpp"
#include "gpufeed/doctor/detail/format.hpp"
#include "gpufeed/doctor/detail/nvml.hpp"
#include "gpufeed/doctor/doctor.hpp"

using namespace gpufeed;
namespace dd = gpufeed::detail::doctor;

namespace {
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Sets an environment variable for one scope.
class env_var {
 public:
  env_var(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  env_var(const env_var&) = delete;
  env_var& operator=(const env_var&) = delete;
  ~env_var() { ::unsetenv(name_); }

 private:
  const char* name_;
};
}  // namespace

TEST_CASE("NVML absent: not found, every query answers nothing") {
  dd::nvml_api n("libnvidia-ml-gpufeed-missing.so.1");
  CHECK_FALSE(n.ok());
  CHECK_FALSE(n.found());
  CHECK(n.error() == "NVML not found (libnvidia-ml-gpufeed-missing.so.1)");
  CHECK_FALSE(n.dlopen_error().empty());
  CHECK_FALSE(n.driver_version());
  CHECK_FALSE(n.device_count());
  CHECK(n.by_index(0) == nullptr);
  CHECK(n.by_pci_bus_id("0000:17:00.0") == nullptr);
  CHECK_FALSE(n.curr_link_generation(nullptr));
  CHECK_FALSE(n.clock_reasons(nullptr));
}

TEST_CASE("NVML through a fake library: readings, the old throttle name, unsupported fields") {
  GPUFEED_FAKE_NVML_OR_FAIL(fake);
  dd::nvml_api n(fake);
  REQUIRE(n.ok());
  CHECK(n.driver_version() == "999.88.77");
  CHECK(n.device_count() == 1u);
  const auto dev = n.by_index(0);
  REQUIRE(dev != nullptr);
  CHECK(n.by_index(1) == nullptr);
  CHECK(n.name(dev) == "Fake GPU \"quoted\"");
  CHECK(n.curr_link_generation(dev) == 1u);
  CHECK(n.curr_link_width(dev) == 16u);
  CHECK(n.max_link_generation(dev) == 5u);
  CHECK(n.max_link_width(dev) == 16u);
  CHECK(n.gpu_max_link_generation(dev) == 5u);
  CHECK(n.clock_reasons(dev) == 0x1ull);  // resolved through the pre-r535 name
  {
    env_var link("GPUFEED_FAKE_NVML_LINK", "4,8,0,16,5");
    env_var reasons("GPUFEED_FAKE_NVML_REASONS", "0x44");
    CHECK(n.curr_link_generation(dev) == 4u);
    CHECK(n.curr_link_width(dev) == 8u);
    CHECK_FALSE(n.max_link_generation(dev));  // NOT_SUPPORTED: no value, no error
    CHECK(n.clock_reasons(dev) == 0x44ull);
  }
}

TEST_CASE("NVML that fails to start says why") {
  GPUFEED_FAKE_NVML_OR_FAIL(fake);
  SUBCASE("driver/library version mismatch") {
    env_var rc("GPUFEED_FAKE_NVML_INIT", "18");
    dd::nvml_api n(fake);
    CHECK(n.found());
    CHECK_FALSE(n.ok());
    CHECK(has(n.error(), "different versions"));
    CHECK(has(n.error(), "(18)"));
    CHECK_FALSE(n.device_count());
  }
  SUBCASE("driver not loaded") {
    env_var rc("GPUFEED_FAKE_NVML_INIT", "9");
    dd::nvml_api n(fake);
    CHECK(has(n.error(), "driver is not loaded"));
  }
}

TEST_CASE("clock throttle reasons decode to words") {
  CHECK(dd::decode_clock_reasons(0).words.empty());
  CHECK_FALSE(dd::decode_clock_reasons(0).slows_work);
  const auto idle = dd::decode_clock_reasons(0x1);
  REQUIRE(idle.words.size() == 1);
  CHECK(has(idle.words[0], "idle"));
  CHECK_FALSE(idle.slows_work);
  CHECK(dd::decode_clock_reasons(0x4).slows_work);
  CHECK(has(dd::decode_clock_reasons(0x4).words[0], "power limit"));
  const auto hot = dd::decode_clock_reasons(0x20 | 0x40);
  CHECK(hot.words.size() == 2);
  CHECK(hot.slows_work);
  CHECK_FALSE(dd::decode_clock_reasons(0x2 | 0x10 | 0x100).slows_work);
  const auto unknown = dd::decode_clock_reasons(0x8000);
  REQUIRE(unknown.words.size() == 1);
  CHECK(has(unknown.words[0], "bit 0x8000"));
}

TEST_CASE("PCIe arithmetic and number words") {
  CHECK(dd::pcie_link_gbps(5, 16) == doctest::Approx(63.015).epsilon(0.001));
  CHECK(dd::pcie_link_gbps(4, 16) == doctest::Approx(31.508).epsilon(0.001));
  CHECK(dd::pcie_link_gbps(3, 16) == doctest::Approx(15.754).epsilon(0.001));
  CHECK(dd::pcie_link_gbps(1, 1) == doctest::Approx(0.25));
  CHECK(dd::pcie_link_gbps(0, 16) == 0.0);
  CHECK(dd::pcie_link_gbps(9, 16) == 0.0);
  CHECK(dd::pcie_link_name(5, 16) == "PCIe Gen5 x16");
  CHECK(dd::bytes(5) == "5 bytes");
  CHECK(dd::bytes(64 << 10) == "64 KiB");
  CHECK(dd::bytes(1536) == "1.5 KiB");
  CHECK(dd::bytes(std::uint64_t{256} << 20) == "256 MiB");
  CHECK(dd::gbps(52.94) == "52.9 GB/s");
  CHECK(dd::gbps(6.2) == "6.20 GB/s");
  CHECK(dd::gbps(0.5) == "500 MB/s");
}

TEST_CASE("skipped GPU checks: every id, status skip, the reason") {
  doctor_report r;
  add_skipped_gpu_checks(r, "this gpufeed was built without CUDA");
  REQUIRE(r.checks.size() == std::size(gpu_check_names));
  for (std::size_t i = 0; i < r.checks.size(); ++i) {
    CHECK(r.checks[i].id == gpu_check_names[i].id);
    CHECK(r.checks[i].title == gpu_check_names[i].title);
    CHECK(r.checks[i].status == check_status::skip);
    CHECK(r.checks[i].summary == "this gpufeed was built without CUDA");
  }
  CHECK(gpu_check_title("gpu.h2d") == std::string(gpu_check_names[6].title));
  CHECK(gpu_check_title("nope").empty());
}
