// The kernels that let `gpufeed bench` (and any loader in this program) decode compressed chunks
// on the GPU (gpufeed/cuda/device_decode.cuh registers them with the device engine). The rest of
// the tool is host C++.
#include "gpufeed/cuda/device_decode.cuh"

namespace gpufeed::cli {

// Whether loaders of this program can decode on the device; naming it keeps the registration.
bool device_decode_kernels() noexcept { return gpufeed::cuda::device_decode_available(); }

}  // namespace gpufeed::cli
