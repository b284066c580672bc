// gpufeed — choosing the target portably: the GPU when this program has gpufeed's CUDA component
// and a usable device, else the host. Compiles without the CUDA Toolkit.
//
//   std::string why;
//   loader_config c;
//   c.target = gpufeed::device_or_host(0, &why);  // why: the reason when it is the host target
//
// Linked with gpufeed::cuda (which defines GPUFEED_HAS_CUDA) this is cuda::device_or_host();
// without it, always target::host(), and `why` receives built_without_cuda. Only then does this
// header include CUDA's: with gpufeed::gpufeed alone it needs no CUDA header. The two versions
// live in different inline namespaces, so translation units compiled with and without the CUDA
// component never share a definition.
#pragma once

#include <string>

#include "gpufeed/target.hpp"

#if defined(GPUFEED_HAS_CUDA)
#include "gpufeed/cuda/device_target.hpp"
#endif

namespace gpufeed {

// The reason device_or_host() gives in a program built without the CUDA component.
inline constexpr const char* built_without_cuda =
    "built without CUDA (gpufeed's CUDA component, gpufeed::cuda, is not linked)";

#if defined(GPUFEED_HAS_CUDA)
inline namespace with_cuda {
inline constexpr bool built_with_cuda = true;
// cuda::device(device) when that device is usable, else the host target; `why` (optional)
// receives the reason for the fallback.
inline target device_or_host(int device = 0, std::string* why = nullptr) {
  return cuda::device_or_host(device, why);
}
}  // namespace with_cuda
#else
inline namespace host_only {
inline constexpr bool built_with_cuda = false;
// Always the host target (no CUDA component); `why` (optional) receives built_without_cuda.
inline target device_or_host(int device = 0, std::string* why = nullptr) {
  (void)device;
  if (why) *why = built_without_cuda;
  return target::host();
}
}  // namespace host_only
#endif

}  // namespace gpufeed
