// The GPU checks' judgements and words, fed with made-up probes and device queries: what a user
// reads for a fast link, a slow one, a lagging NVML reading, a too-old driver, a hidden GPU.
// Calls no CUDA function, so it runs without a GPU.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "fake_nvml_path.hpp"
#include "gpufeed/cuda/doctor/gpu_checks.hpp"

using namespace gpufeed;
namespace cd = gpufeed::cuda::detail;
namespace dd = gpufeed::detail::doctor;

namespace {
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

constexpr std::size_t KiB64 = std::size_t{64} << 10, MiB256 = std::size_t{256} << 20;

// A CUDA GPU 0 on a Gen5 x16 link with the H200 machine's measured rates.
cd::gpu_probe h200(double pinned_256 = 52.95, double pageable_256 = 9.8) {
  cd::gpu_probe p;
  p.cuda_id = 0;
  p.label = "GPU 0 (NVIDIA H200)";
  cuda::device_properties d;
  d.name = "NVIDIA H200";
  d.total_memory = std::size_t{143771} << 20;
  d.compute_major = 9;
  d.multiprocessors = 132;
  d.async_engines = 3;
  d.pci_bus_id = "0000:17:00.0";
  p.props = d;
  p.free_memory = std::size_t{140000} << 20;
  p.max_generation = 5;
  p.max_width = 16;
  p.gpu_max_generation = 5;
  p.idle.generation = 1;
  p.idle.width = 16;
  p.busy.generation = 5;
  p.busy.width = 16;
  p.busy.clock_reasons = 0x1;
  p.busy_confirmed = true;
  p.h2d = {{KiB64, 6.2, 2.1}, {MiB256, pinned_256, pageable_256}};
  return p;
}

cuda::device_query gpu_query() {
  cuda::device_query q;
  q.available = true;
  q.device_count = 1;
  q.driver_version = 13000;
  q.runtime_version = 13000;
  return q;
}
}  // namespace

TEST_CASE("copy verdict on the H200 machine's figures") {
  const auto v = cd::judge_h2d(h200());
  CHECK(v.status == check_status::pass);
  CHECK(has(v.words, "pinned copies reach 5"));  // 52.9 or 53.0, by rounding
  CHECK(has(v.words, "84% of what a PCIe Gen5 x16 link carries (63.0 GB/s, this GPU's maximum)"));
  CHECK(has(v.words, "pageable copies reach only 9.80 GB/s: use pinned memory"));
  CHECK(v.pinned_best == 52.95);
}

TEST_CASE("copy verdicts that warn, and one without NVML") {
  SUBCASE("pinned far below the link") {
    const auto v = cd::judge_h2d(h200(20.0));
    CHECK(v.status == check_status::warn);
    CHECK(has(v.words, "32% of what a PCIe Gen5 x16 link"));
  }
  SUBCASE("pageable as fast as pinned") {
    const auto v = cd::judge_h2d(h200(10.0, 10.0));
    CHECK(v.status == check_status::warn);
    CHECK(has(v.words, "as fast as pinned"));
  }
  SUBCASE("no link known") {
    auto p = h200();
    p.max_generation.reset();
    p.busy_confirmed = false;
    const auto v = cd::judge_h2d(p);
    CHECK(v.status == check_status::pass);
    CHECK(has(v.words, "unknown without NVML"));
  }
  SUBCASE("only the reading under a copy known") {
    auto p = h200();
    p.max_generation.reset();
    CHECK(has(cd::judge_h2d(p).words, "as read during a copy"));
  }
}

TEST_CASE("h2d check: facts per size, numbers, small-copy advice, slowest of several, failures") {
  auto a = h200();
  auto b = h200(48.0);  // 76% of the link: slower, still fine
  b.cuda_id = 1;
  b.label = "GPU 1 (NVIDIA H200)";
  const auto c = cd::h2d_check(gpu_query(), {a, b}, true);
  CHECK(c.id == "gpu.h2d");
  CHECK(c.status == check_status::pass);
  CHECK(has(c.summary, "slowest of 2 GPUs: pinned copies reach 48.0 GB/s"));
  bool small_advice = false, per_size = false;
  for (const auto& [k, v] : c.facts) {
    small_advice = small_advice || (k == "GPU 0 (NVIDIA H200), small copies" && has(v, "copy whole batches"));
    per_size = per_size || (k == "GPU 1 (NVIDIA H200), 256 MiB copies" && v == "pinned 48.0 GB/s, pageable 9.80 GB/s");
  }
  CHECK(small_advice);
  CHECK(per_size);
  bool key = false;
  for (const auto& [k, v] : c.numbers) key = key || (k == "gpu1_pinned_gbps_268435456" && v == 48.0);
  CHECK(key);

  auto broken = h200();
  broken.h2d.clear();
  broken.h2d_error = "CUDA call failed: out of memory";
  const auto f = cd::h2d_check(gpu_query(), {broken}, true);
  CHECK(f.status == check_status::fail);
  CHECK(has(f.facts.at(0).second, "out of memory"));
  CHECK(cd::h2d_check(gpu_query(), {a}, false).status == check_status::skip);
}

TEST_CASE("pcie check: at maximum, trained below it, and a lagging reading") {
  GPUFEED_FAKE_NVML_OR_FAIL(fake);
  const dd::nvml_api nvml(fake);  // the checks only ask it whether it started
  REQUIRE(nvml.ok());
  const auto handle = nvml.by_index(0);  // a probe without an NVML handle has no link readings
  auto h200 = [handle](double pinned = 52.95) {
    auto p = ::h200(pinned);
    p.nvml = handle;
    return p;
  };
  SUBCASE("at maximum under a copy") {
    const auto c = cd::pcie_check(nvml, {h200()});
    CHECK(c.status == check_status::pass);
    CHECK(has(c.summary, "Gen5 x16 under a copy, the link's maximum"));
    CHECK(has(c.facts.at(0).second, "Gen1 x16 at idle"));
  }
  SUBCASE("trained below maximum: the copy agrees") {
    auto p = h200(25.0);
    p.busy.generation = 4;
    const auto c = cd::pcie_check(nvml, {p});
    CHECK(c.status == check_status::warn);
    CHECK(has(c.summary, "runs at Gen4 x16 under a copy, below its maximum Gen5 x16"));
    CHECK(has(c.hint, "x16 slot"));
  }
  SUBCASE("reading says Gen4 but the copy beat Gen4: it lagged") {
    auto p = h200();
    p.busy.generation = 4;
    const auto c = cd::pcie_check(nvml, {p});
    CHECK(c.status == check_status::pass);
    CHECK(has(c.summary, "the reading lagged"));
  }
  SUBCASE("narrower than the maximum") {
    auto p = h200(26.0);
    p.busy.width = 8;
    CHECK(cd::pcie_check(nvml, {p}).status == check_status::warn);
  }
}

TEST_CASE("throttle check reads the reasons seen under a copy") {
  GPUFEED_FAKE_NVML_OR_FAIL(fake);
  const dd::nvml_api nvml(fake);
  auto p = h200();
  p.nvml = nvml.by_index(0);
  p.idle.clock_reasons = 0x1;
  p.busy.clock_reasons = 0x4;
  const auto c = cd::throttle_check(nvml, {p});
  CHECK(c.status == check_status::warn);
  CHECK(has(c.summary, "GPU 0 (NVIDIA H200) under a copy: at the software power limit"));
}

TEST_CASE("visible check: reasons become hints") {
  cuda::device_query q;
  q.runtime_version = 13000;
  q.reason = "plain reason";
  SUBCASE("no driver: warn, fail when a GPU is required") {
    q.status = cudaErrorInsufficientDriver;
    CHECK(cd::visible_check(q, false).status == check_status::warn);
    CHECK(cd::visible_check(q, true).status == check_status::fail);
    CHECK(cd::visible_check(q, false).summary == "plain reason");
  }
  SUBCASE("old driver") {
    q.status = cudaErrorInsufficientDriver;
    q.driver_version = 12040;
    const auto c = cd::visible_check(q, false);
    CHECK(c.status == check_status::fail);
    CHECK(has(c.hint, "r580"));
  }
  SUBCASE("hidden by CUDA_VISIBLE_DEVICES") {
    q.status = cudaErrorNoDevice;
    q.driver_version = 13000;
    ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
    const auto c = cd::visible_check(q, false);
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    CHECK(c.status == check_status::fail);
    CHECK(has(c.hint, "hides every GPU"));
    CHECK(c.facts.at(0).second == "(set, empty)");
  }
  SUBCASE("driver mismatch") {
    q.status = cudaErrorSystemDriverMismatch;
    q.driver_version = 13000;
    CHECK(has(cd::visible_check(q, false).hint, "reboot"));
  }
  SUBCASE("available") {
    const auto c = cd::visible_check(gpu_query(), true);
    CHECK(c.status == check_status::pass);
    CHECK(c.summary == "1 GPU is visible to CUDA");
  }
}

TEST_CASE("versions check: compatible, minor-version compatible, too old, no driver") {
  const dd::nvml_api no_nvml("libnvidia-ml-gpufeed-missing.so.1");
  auto q = gpu_query();
  CHECK(cd::versions_check(q, no_nvml).status == check_status::pass);
  q.runtime_version = 13010;
  const auto minor = cd::versions_check(q, no_nvml);
  CHECK(minor.status == check_status::warn);
  CHECK(has(minor.summary, "minor-version compatibility"));
  q.driver_version = 12080;
  q.available = false;
  const auto old = cd::versions_check(q, no_nvml);
  CHECK(old.status == check_status::fail);
  CHECK(has(old.hint, "r580"));
  q.driver_version = 0;
  CHECK(cd::versions_check(q, no_nvml).status == check_status::skip);
}

TEST_CASE("devices check describes each GPU") {
  const auto c = cd::devices_check(gpu_query(), {h200()});
  CHECK(c.status == check_status::pass);
  CHECK(has(c.summary, "GPU 0: NVIDIA H200, 140.4 GiB, compute 9.0"));
  CHECK(has(c.facts.at(0).second, "3 copy engines, PCI 0000:17:00.0"));
  auto broken = h200();
  broken.props.reset();
  broken.error = "cudaErrorInvalidDevice";
  CHECK(cd::devices_check(gpu_query(), {broken}).status == check_status::fail);
}
