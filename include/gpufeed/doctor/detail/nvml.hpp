// NVML (the driver's management library) loaded at run time with dlopen, never linked: a
// gpufeed program must start on machines without it (CI, containers given only libcuda). Only
// the few calls the doctor needs are resolved, by name; a call the installed NVML lacks is
// reported as "not reported", never as an error. Host-only: needs no CUDA header.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace gpufeed::detail::doctor {

// The subset of nvml.h's ABI used here (declared, not included: the toolkit on a build machine
// need not ship nvml.h, and the ABI of these calls has been stable since NVML 5).
using nvml_return = int;
struct nvml_device_st;
using nvml_device = nvml_device_st*;
inline constexpr nvml_return nvml_success = 0;
inline constexpr nvml_return nvml_error_no_permission = 4;
inline constexpr nvml_return nvml_error_driver_not_loaded = 9;
inline constexpr nvml_return nvml_error_lib_rm_version_mismatch = 18;

class nvml_api {
 public:
  // Loads library (dlopen, RTLD_NOW | RTLD_LOCAL) and calls nvmlInit_v2. Never throws; ok() is
  // false when either failed, and error() says why in plain words. The library stays loaded for
  // the life of the process (NVML is not meant to be unloaded); nvmlShutdown is called here on
  // destruction, NVML counts init/shutdown pairs.
  explicit nvml_api(const std::string& library = "libnvidia-ml.so.1") : library_(library) {
    lib_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      const char* why = ::dlerror();
      dlopen_error_ = why ? why : "dlopen failed";
      error_ = "NVML not found (" + library + ")";
      return;
    }
    found_ = true;
    resolve(init_, "nvmlInit_v2");
    resolve(shutdown_, "nvmlShutdown");
    resolve(error_string_, "nvmlErrorString");
    resolve(driver_version_, "nvmlSystemGetDriverVersion");
    resolve(count_, "nvmlDeviceGetCount_v2");
    resolve(by_bus_, "nvmlDeviceGetHandleByPciBusId_v2");
    resolve(by_index_, "nvmlDeviceGetHandleByIndex_v2");
    resolve(name_, "nvmlDeviceGetName");
    resolve(curr_gen_, "nvmlDeviceGetCurrPcieLinkGeneration");
    resolve(max_gen_, "nvmlDeviceGetMaxPcieLinkGeneration");
    resolve(gpu_max_gen_, "nvmlDeviceGetGpuMaxPcieLinkGeneration");
    resolve(curr_width_, "nvmlDeviceGetCurrPcieLinkWidth");
    resolve(max_width_, "nvmlDeviceGetMaxPcieLinkWidth");
    resolve(reasons_, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!reasons_) resolve(reasons_, "nvmlDeviceGetCurrentClocksThrottleReasons");  // before r535
    if (!init_) {
      error_ = library + " has no nvmlInit_v2: this NVML is too old to use";
      return;
    }
    const nvml_return rc = init_status_ = init_();
    if (rc != nvml_success) {
      error_ = "NVML could not start: " + init_failure(rc);
      return;
    }
    initialised_ = true;
  }
  nvml_api(const nvml_api&) = delete;
  nvml_api& operator=(const nvml_api&) = delete;
  ~nvml_api() {
    if (initialised_ && shutdown_) (void)shutdown_();
  }

  [[nodiscard]] bool ok() const noexcept { return initialised_; }
  // The library was found (dlopen succeeded), whether or not it started.
  [[nodiscard]] bool found() const noexcept { return found_; }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  [[nodiscard]] const std::string& library() const noexcept { return library_; }
  // nvmlInit_v2's return code (0 when it succeeded or was never called).
  [[nodiscard]] nvml_return init_status() const noexcept { return init_status_; }
  // dlerror()'s words when the library was not found.
  [[nodiscard]] const std::string& dlopen_error() const noexcept { return dlopen_error_; }

  [[nodiscard]] std::string error_string(nvml_return rc) const {
    const char* s = error_string_ ? error_string_(rc) : nullptr;
    return (s ? std::string(s) : std::string("NVML error")) + " (" + std::to_string(rc) + ")";
  }

  // "580.159.04".
  [[nodiscard]] std::optional<std::string> driver_version() const {
    char buf[96] = {};
    if (!ok() || !driver_version_ || driver_version_(buf, sizeof buf) != nvml_success) return {};
    return std::string(buf);
  }
  [[nodiscard]] std::optional<unsigned> device_count() const {
    unsigned n = 0;
    if (!ok() || !count_ || count_(&n) != nvml_success) return {};
    return n;
  }
  // The device at a PCI bus id as CUDA prints it ("0000:17:00.0"), or nullptr.
  [[nodiscard]] nvml_device by_pci_bus_id(const std::string& bus_id) const {
    nvml_device d = nullptr;
    if (!ok() || !by_bus_ || by_bus_(bus_id.c_str(), &d) != nvml_success) return nullptr;
    return d;
  }
  // NVML's index order is PCI order and ignores CUDA_VISIBLE_DEVICES: match by bus id where a
  // CUDA device is known.
  [[nodiscard]] nvml_device by_index(unsigned i) const {
    nvml_device d = nullptr;
    if (!ok() || !by_index_ || by_index_(i, &d) != nvml_success) return nullptr;
    return d;
  }
  [[nodiscard]] std::optional<std::string> name(nvml_device d) const {
    char buf[96] = {};
    if (!ok() || !d || !name_ || name_(d, buf, sizeof buf) != nvml_success) return {};
    return std::string(buf);
  }
  [[nodiscard]] std::optional<unsigned> curr_link_generation(nvml_device d) const { return get(curr_gen_, d); }
  [[nodiscard]] std::optional<unsigned> max_link_generation(nvml_device d) const { return get(max_gen_, d); }
  // The highest generation the GPU itself supports (max_link_generation is the link's: GPU and
  // slot together).
  [[nodiscard]] std::optional<unsigned> gpu_max_link_generation(nvml_device d) const { return get(gpu_max_gen_, d); }
  [[nodiscard]] std::optional<unsigned> curr_link_width(nvml_device d) const { return get(curr_width_, d); }
  [[nodiscard]] std::optional<unsigned> max_link_width(nvml_device d) const { return get(max_width_, d); }
  // Bit mask of nvmlClocksEventReason* (see clock_reasons below).
  [[nodiscard]] std::optional<unsigned long long> clock_reasons(nvml_device d) const {
    unsigned long long v = 0;
    if (!ok() || !d || !reasons_ || reasons_(d, &v) != nvml_success) return {};
    return v;
  }

 private:
  template <class F>
  void resolve(F& fn, const char* symbol) noexcept {
    fn = reinterpret_cast<F>(::dlsym(lib_, symbol));
  }
  [[nodiscard]] std::optional<unsigned> get(nvml_return (*fn)(nvml_device, unsigned*), nvml_device d) const {
    unsigned v = 0;
    if (!ok() || !d || !fn || fn(d, &v) != nvml_success) return {};
    return v;
  }
  [[nodiscard]] std::string init_failure(nvml_return rc) const {
    switch (rc) {
      case nvml_error_driver_not_loaded:
        return "the NVIDIA driver is not loaded [" + error_string(rc) + "]";
      case nvml_error_no_permission:
        return "this user may not open the GPU device files [" + error_string(rc) + "]";
      case nvml_error_lib_rm_version_mismatch:
        return "the NVIDIA kernel module and the driver's user-space libraries are different "
               "versions (a driver update without a reboot?) [" + error_string(rc) + "]";
      default:
        return error_string(rc);
    }
  }

  std::string library_, error_, dlopen_error_;
  void* lib_ = nullptr;
  bool found_ = false, initialised_ = false;
  nvml_return init_status_ = nvml_success;
  nvml_return (*init_)() = nullptr;
  nvml_return (*shutdown_)() = nullptr;
  const char* (*error_string_)(nvml_return) = nullptr;
  nvml_return (*driver_version_)(char*, unsigned) = nullptr;
  nvml_return (*count_)(unsigned*) = nullptr;
  nvml_return (*by_bus_)(const char*, nvml_device*) = nullptr;
  nvml_return (*by_index_)(unsigned, nvml_device*) = nullptr;
  nvml_return (*name_)(nvml_device, char*, unsigned) = nullptr;
  nvml_return (*curr_gen_)(nvml_device, unsigned*) = nullptr;
  nvml_return (*max_gen_)(nvml_device, unsigned*) = nullptr;
  nvml_return (*gpu_max_gen_)(nvml_device, unsigned*) = nullptr;
  nvml_return (*curr_width_)(nvml_device, unsigned*) = nullptr;
  nvml_return (*max_width_)(nvml_device, unsigned*) = nullptr;
  nvml_return (*reasons_)(nvml_device, unsigned long long*) = nullptr;
};

// nvmlClocksEventReason* bits (nvml.h), each with plain words and whether it costs throughput
// when seen while work runs. Idle and application-clock settings are normal.
struct clock_reason {
  unsigned long long bit;
  const char* id;
  const char* words;
  bool slows_work;
};
inline constexpr clock_reason clock_reasons_table[] = {
    {0x1, "gpu_idle", "idle: no kernel is running, so the clocks are lowered (normal)", false},
    {0x2, "applications_clocks_setting", "held at the applications-clocks setting (nvidia-smi -ac)", false},
    {0x4, "sw_power_cap", "at the software power limit (power cap)", true},
    {0x8, "hw_slowdown", "hardware slowdown: too hot, or the power supply cannot deliver", true},
    {0x10, "sync_boost", "held in step with other GPUs (sync boost)", false},
    {0x20, "sw_thermal_slowdown", "lowered by the driver because the GPU or its memory is too hot", true},
    {0x40, "hw_thermal_slowdown", "lowered by the hardware because it is too hot", true},
    {0x80, "hw_power_brake_slowdown", "lowered by an external power-brake signal (the system's power supply)", true},
    {0x100, "display_clock_setting", "limited by the display clock setting", false},
};

struct decoded_reasons {
  std::vector<std::string> words;  // one per set bit, in bit order; unknown bits named in hex
  bool slows_work = false;         // a bit that costs throughput is set
};

inline decoded_reasons decode_clock_reasons(unsigned long long mask) {
  decoded_reasons d;
  unsigned long long known = 0;
  for (const auto& r : clock_reasons_table) {
    known |= r.bit;
    if (mask & r.bit) {
      d.words.emplace_back(r.words);
      d.slows_work = d.slows_work || r.slows_work;
    }
  }
  for (int b = 0; b < 64; ++b) {
    const unsigned long long bit = 1ull << b;
    if ((mask & bit) && !(known & bit)) {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%llx", bit);
      d.words.push_back(std::string("a reason this gpufeed does not know (bit ") + hex + ")");
    }
  }
  return d;
}

}  // namespace gpufeed::detail::doctor
