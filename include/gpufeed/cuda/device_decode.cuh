// gpufeed::cuda — decoding on the device: include this header in a CUDA (.cu) translation unit
// of the program (one is enough; more do no harm) to give device engines (device_target.hpp)
// their unit_decoder (transfer_engine::decoder()): the kernels that decode compressed units into
// the engine's device cache and gather each batch's records from it (docs/design.md, "GPU decode
// in the loader").
//
// The engine itself is host code, included by .cpp files that cannot hold kernels, so it finds
// them through a table (detail/assembly_kernels.hpp) that this header fills while the program
// starts. Without it, decoder() is nullptr and batches take the host path (decode_site::device is
// then a config_error saying so). The kernels are templates, so every translation unit that
// includes this header may hold them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpufeed/cuda/detail/assembly_kernels.hpp"
#include "gpufeed/cuda/detail/codec/gather_kernels.cuh"
#include "gpufeed/cuda/detail/codec/unit_kernels.cuh"

namespace gpufeed::cuda::detail {

inline void assembly_decode(const std::uint8_t* src, std::uint8_t* cache,
                            const gpufeed::detail::codec::gpu_unit* units, std::uint32_t count,
                            std::uint32_t largest_scratch, std::uint32_t* status,
                            cudaStream_t stream) {
  launch_decode_units(src, cache, units, count, largest_scratch, status, stream, cache);
}

inline constexpr assembly_kernels compiled_assembly_kernels{&assembly_decode, &launch_gather_runs};

// Registers the table before main() runs.
inline const bool assembly_kernels_registered = [] {
  registered_assembly_kernels().store(&compiled_assembly_kernels, std::memory_order_release);
  return true;
}();

}  // namespace gpufeed::cuda::detail

namespace gpufeed::cuda {

// True when this program's device engines can decode on the device (always, once this header
// is included somewhere; a caller that names it also keeps its translation unit's registration).
inline bool device_decode_available() noexcept {
  return detail::assembly_kernels_registered &&
         detail::registered_assembly_kernels().load(std::memory_order_acquire) != nullptr;
}

}  // namespace gpufeed::cuda
