// gpufeed::cuda — NVTX ranges in the "gpufeed" domain, so Nsight Systems shows the pipeline's
// stages (read, copy, transform, wait) on the threads that run them.
//
// NVTX3 is header-only: with no tool attached each range costs a branch on a null function
// pointer, so ranges stay on in release builds.
#pragma once

#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <cstdint>

namespace gpufeed::cuda {

namespace detail {
inline nvtxDomainHandle_t nvtx_domain() noexcept {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("gpufeed");
  return d;
}
}  // namespace detail

// RAII range: pushed on construction, popped on destruction, on the calling thread.
class nvtx_range {
 public:
  // name must outlive the range (string literals do). color is 0xAARRGGBB.
  explicit nvtx_range(const char* name, std::uint32_t color = 0xff76b900u) noexcept {
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = color;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(detail::nvtx_domain(), &a);
  }
  nvtx_range(const nvtx_range&) = delete;
  nvtx_range& operator=(const nvtx_range&) = delete;
  ~nvtx_range() { nvtxDomainRangePop(detail::nvtx_domain()); }
};

// Names the calling OS thread in Nsight Systems' timeline ("gpufeed worker 3").
inline void name_current_thread(const char* name) noexcept {
  nvtxNameOsThreadA(static_cast<std::uint32_t>(::gettid()), name);
}

}  // namespace gpufeed::cuda
