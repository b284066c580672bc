// What README.md's C++ blocks leave to the reader: the consumer's stream and kernel, its launch
// shape, the host loop's consumer, the record transform's decoder, and the standard headers the
// telemetry line uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include <span>

#include "gpufeed/batch_view.hpp"
#include "gpufeed/record_transform.hpp"
#include "gpufeed/verdict.hpp"

namespace readme_prelude {

inline gpufeed::stream_handle my_stream = nullptr;
#if defined(__CUDACC__)
inline dim3 grid, block;
__global__ inline void step(std::byte*, const std::uint64_t*, const std::int64_t*, std::size_t) {}
__global__ inline void train_step(void*, std::size_t) {}  // the image loader block's step
#else
inline int grid = 1, block = 1;  // unused by the host version of the launch
inline void step(std::byte*, const std::uint64_t*, const std::int64_t*, std::size_t) {}
#endif

// The user's code in the host-target loop: rows of `cols` floats, one label per row.
inline void consume_rows(const float*, std::size_t, std::size_t, const std::int64_t*) {}

// The user's decoder in the record transform block: writes out.size() bytes.
inline void decode_crop_chw(std::span<const std::byte>, std::span<std::byte> out, bool,
                            gpufeed::record_rng&) {
  for (std::byte& b : out) b = std::byte{0};
}

}  // namespace readme_prelude
