// A stand-in for libnvidia-ml.so.1 with the calls the doctor resolves, so the NVML paths (link
// readings, throttle decoding, init failures) run on machines without a GPU. One fake GPU;
// its answers come from environment variables read at each call, so one test can vary them:
//   GPUFEED_FAKE_NVML_INIT     nvmlInit_v2's return code (default 0 = success)
//   GPUFEED_FAKE_NVML_REASONS  clock event reason mask (default 0x1 = idle)
//   GPUFEED_FAKE_NVML_LINK     "curr_gen,curr_width,max_gen,max_width,gpu_max_gen" (default
//                              "1,16,5,16,5"); a 0 field answers NVML_ERROR_NOT_SUPPORTED
//   GPUFEED_FAKE_NVML_NO_REASONS  if set, the clock-reason calls are "not supported"
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
struct fake_device {
  int unused;
};
fake_device the_device{0};
int initialised = 0;

constexpr int success = 0, not_supported = 3, invalid_argument = 2, uninitialized = 1,
              insufficient_size = 7;

unsigned long long env_ull(const char* name, unsigned long long fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 0) : fallback;
}

unsigned link_field(int index) {
  unsigned f[5] = {1, 16, 5, 16, 5};
  if (const char* v = std::getenv("GPUFEED_FAKE_NVML_LINK"))
    std::sscanf(v, "%u,%u,%u,%u,%u", &f[0], &f[1], &f[2], &f[3], &f[4]);
  return f[index];
}

int answer_link(void* dev, unsigned* out, int index) {
  if (!initialised) return uninitialized;
  if (dev != &the_device || !out) return invalid_argument;
  const unsigned v = link_field(index);
  if (v == 0) return not_supported;
  *out = v;
  return success;
}

int copy_string(const char* s, char* out, unsigned length) {
  if (!out) return invalid_argument;
  if (std::strlen(s) + 1 > length) return insufficient_size;
  std::strcpy(out, s);
  return success;
}
}  // namespace

extern "C" {
int nvmlInit_v2() {
  const int rc = static_cast<int>(env_ull("GPUFEED_FAKE_NVML_INIT", 0));
  if (rc == success) ++initialised;
  return rc;
}
int nvmlShutdown() {
  if (!initialised) return uninitialized;
  --initialised;
  return success;
}
const char* nvmlErrorString(int rc) {
  switch (rc) {
    case 0: return "Success";
    case 9: return "Driver Not Loaded";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
  }
}
int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  if (!initialised) return uninitialized;
  return copy_string("999.88.77", version, length);
}
int nvmlDeviceGetCount_v2(unsigned* count) {
  if (!initialised) return uninitialized;
  *count = 1;
  return success;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (!initialised) return uninitialized;
  if (index != 0) return invalid_argument;
  *device = &the_device;
  return success;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char*, void** device) {
  if (!initialised) return uninitialized;
  *device = &the_device;
  return success;
}
int nvmlDeviceGetName(void* dev, char* name, unsigned length) {
  if (!initialised) return uninitialized;
  if (dev != &the_device) return invalid_argument;
  return copy_string("Fake GPU \"quoted\"", name, length);
}
int nvmlDeviceGetCurrPcieLinkGeneration(void* d, unsigned* v) { return answer_link(d, v, 0); }
int nvmlDeviceGetCurrPcieLinkWidth(void* d, unsigned* v) { return answer_link(d, v, 1); }
int nvmlDeviceGetMaxPcieLinkGeneration(void* d, unsigned* v) { return answer_link(d, v, 2); }
int nvmlDeviceGetMaxPcieLinkWidth(void* d, unsigned* v) { return answer_link(d, v, 3); }
int nvmlDeviceGetGpuMaxPcieLinkGeneration(void* d, unsigned* v) { return answer_link(d, v, 4); }
// Only the pre-r535 name, so the doctor's fallback to it is exercised.
int nvmlDeviceGetCurrentClocksThrottleReasons(void* dev, unsigned long long* reasons) {
  if (!initialised) return uninitialized;
  if (dev != &the_device || !reasons) return invalid_argument;
  if (std::getenv("GPUFEED_FAKE_NVML_NO_REASONS")) return not_supported;
  *reasons = env_ull("GPUFEED_FAKE_NVML_REASONS", 0x1);
  return success;
}
}
