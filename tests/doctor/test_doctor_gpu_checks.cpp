// The GPU checks' behaviour that holds with or without a GPU: every id with a status, plain
// reasons, a missing NVML skipped with its message, a fake NVML decoded into link and throttle
// verdicts. Copy rates are not measured here (measure_h2d = false), so this stays fast on a GPU
// machine too; test_doctor_gpu measures them.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include <string>

#include "gpufeed/cuda/device.hpp"
#include "gpufeed/cuda/doctor/gpu_checks.hpp"
#include "fake_nvml_path.hpp"

using namespace gpufeed;

namespace {
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

doctor_report run(const std::string& nvml, bool require_gpu = false) {
  cuda::gpu_check_options o;
  o.nvml_library = nvml;
  o.measure_h2d = false;
  o.require_gpu = require_gpu;
  doctor_report r;
  cuda::add_gpu_checks(r, o);
  return r;
}

const doctor_check& get(const doctor_report& r, const char* id) {
  const doctor_check* c = r.find(id);
  REQUIRE_MESSAGE(c != nullptr, "missing check " << id);
  return *c;
}

double number(const doctor_check& c, const std::string& key) {
  for (const auto& [k, v] : c.numbers)
    if (k == key) return v;
  return -1.0;
}

class env_var {
 public:
  env_var(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  env_var(const env_var&) = delete;
  env_var& operator=(const env_var&) = delete;
  ~env_var() { ::unsetenv(name_); }

 private:
  const char* name_;
};

constexpr const char* missing_nvml = "libnvidia-ml-gpufeed-missing.so.1";
// The number-key prefix of the first GPU the PCIe and throttle checks examine.
std::string first_gpu_prefix() { return cuda::has_device() ? "gpu0_" : "nvml0_"; }
}  // namespace

TEST_CASE("every GPU check id, in order, with a status and words") {
  const auto r = run(missing_nvml);
  REQUIRE(r.checks.size() == std::size(gpu_check_names));
  for (std::size_t i = 0; i < r.checks.size(); ++i) {
    CHECK(r.checks[i].id == gpu_check_names[i].id);
    CHECK(r.checks[i].title == gpu_check_names[i].title);
    CHECK_FALSE(r.checks[i].summary.empty());
  }
  const auto j = nlohmann::json::parse(r.to_json_string());
  REQUIRE(j.at("checks").size() == std::size(gpu_check_names));
  for (const auto& c : j.at("checks")) {
    const std::string s = c.at("status");
    CHECK((s == "pass" || s == "warn" || s == "fail" || s == "skip"));
  }
  MESSAGE(r.to_text());
}

TEST_CASE("NVML absent: the PCIe and throttle checks are skipped with the message") {
  const auto r = run(missing_nvml);
  const std::string msg = std::string("NVML not found (") + missing_nvml + "): PCIe and throttle checks skipped";
  CHECK(get(r, "gpu.nvml").status == check_status::skip);
  CHECK(get(r, "gpu.nvml").summary == msg);
  CHECK(has(get(r, "gpu.nvml").hint, "libnvidia-ml.so.1"));
  CHECK(get(r, "gpu.pcie").status == check_status::skip);
  CHECK(get(r, "gpu.pcie").summary == msg);
  CHECK(get(r, "gpu.throttle").status == check_status::skip);
  CHECK(get(r, "gpu.throttle").summary == msg);
}

TEST_CASE("without a GPU: skip or warn with the plain reason, never a crash") {
  const auto& q = cuda::query();
  if (q.available) {
    MESSAGE("this machine has a GPU: the no-GPU wording is not exercised here");
    return;
  }
  const auto r = run(missing_nvml);
  const auto& visible = get(r, "gpu.visible");
  CHECK(visible.summary == q.reason);
  CHECK_FALSE(visible.hint.empty());
  CHECK(visible.status == (q.driver_version == 0 ? check_status::warn : check_status::fail));
  CHECK(get(r, "gpu.devices").status == check_status::skip);
  CHECK(get(r, "gpu.h2d").status == check_status::skip);
  CHECK(has(get(r, "gpu.h2d").summary, "no GPU visible to CUDA"));
  if (q.driver_version == 0) {
    CHECK(get(r, "gpu.versions").status == check_status::skip);
    CHECK(has(get(r, "gpu.versions").summary, "no NVIDIA driver"));
  }
  // require_gpu makes the absence a failure.
  const auto strict = run(missing_nvml, true);
  CHECK(get(strict, "gpu.visible").status == check_status::fail);
  CHECK(strict.exit_code() == 1);
}

TEST_CASE("versions: runtime and driver CUDA versions are reported") {
  const auto r = run(missing_nvml);
  const auto& v = get(r, "gpu.versions");
  CHECK(number(v, "runtime_cuda_version") == cuda::query().runtime_version);
  CHECK(number(v, "driver_cuda_version") == cuda::query().driver_version);
  if (cuda::query().available) CHECK((v.status == check_status::pass || v.status == check_status::warn));
}

TEST_CASE("fake NVML: idle link below its maximum is called normal; throttle words") {
  GPUFEED_FAKE_NVML_OR_FAIL(fake);
  const auto r = run(fake);
  const auto& nvml = get(r, "gpu.nvml");
  CHECK(has(nvml.summary, "sees 1 GPU"));
  CHECK(nvml.status == (cuda::has_device() ? check_status::pass : check_status::warn));
  if (!cuda::has_device()) CHECK(has(nvml.summary, "CUDA sees none"));
  const auto& pcie = get(r, "gpu.pcie");
  CHECK(pcie.status == check_status::pass);
  CHECK(has(pcie.summary, "Gen1 x16 at idle"));
  CHECK(has(pcie.summary, "a lower generation at idle is normal"));
  CHECK(number(pcie, first_gpu_prefix() + "pcie_max_generation") == 5.0);
  CHECK(number(pcie, first_gpu_prefix() + "pcie_max_width") == 16.0);
  const auto& thr = get(r, "gpu.throttle");
  CHECK(thr.status == check_status::pass);
  CHECK(has(thr.summary, "no GPU's clocks are held back"));
  CHECK(number(thr, first_gpu_prefix() + "clock_reasons") == 1.0);
  CHECK(nlohmann::json::parse(r.to_json_string()).at("checks").size() == std::size(gpu_check_names));
}

TEST_CASE("fake NVML: a slot that limits the link, a power cap, silence") {
  GPUFEED_FAKE_NVML_OR_FAIL(fake);
  SUBCASE("link limited below what the GPU supports") {
    env_var link("GPUFEED_FAKE_NVML_LINK", "4,16,4,16,5");
    const auto r = run(fake);
    const auto& pcie = get(r, "gpu.pcie");
    CHECK(pcie.status == check_status::warn);
    CHECK(has(pcie.summary, "supports Gen5 but its link allows only Gen4"));
    CHECK(has(pcie.hint, "slot"));
  }
  SUBCASE("power cap and thermal slowdown") {
    env_var reasons("GPUFEED_FAKE_NVML_REASONS", "0x24");
    const auto r = run(fake);
    const auto& thr = get(r, "gpu.throttle");
    CHECK(thr.status == check_status::warn);
    CHECK(has(thr.summary, "power limit"));
    CHECK(has(thr.summary, "too hot"));
    CHECK(has(thr.hint, "cooling"));
  }
  SUBCASE("link and reasons not reported") {
    env_var link("GPUFEED_FAKE_NVML_LINK", "0,0,0,0,0");
    env_var none("GPUFEED_FAKE_NVML_NO_REASONS", "1");
    const auto r = run(fake);
    CHECK(get(r, "gpu.pcie").status == check_status::skip);
    CHECK(has(get(r, "gpu.pcie").summary, "does not report"));
    CHECK(get(r, "gpu.throttle").status == check_status::skip);
  }
  SUBCASE("NVML without a loaded driver warns") {
    env_var rc("GPUFEED_FAKE_NVML_INIT", "9");
    const auto r = run(fake);
    CHECK(get(r, "gpu.nvml").status == check_status::warn);
    CHECK(has(get(r, "gpu.nvml").summary, "driver is not loaded"));
  }
  SUBCASE("driver/library mismatch fails the NVML check") {
    env_var rc("GPUFEED_FAKE_NVML_INIT", "18");
    const auto r = run(fake);
    CHECK(get(r, "gpu.nvml").status == check_status::fail);
    CHECK(has(get(r, "gpu.nvml").summary, "different versions"));
    CHECK(get(r, "gpu.pcie").status == check_status::skip);
    CHECK(has(get(r, "gpu.pcie").summary, "PCIe and throttle checks skipped"));
  }
}
