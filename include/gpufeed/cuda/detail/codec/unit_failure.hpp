// gpufeed::cuda::detail — a GPU-decoded chunk's outcome in the CPU path's words: the statuses of
// its units (unit_status) turned into the result (message, api) the CPU decoders give the same
// bytes, which the loader reports as corrupt_error. Host only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "gpufeed/cuda/detail/codec/lz4_block.hpp"
#include "gpufeed/detail/codec/gpu_units.hpp"
#include "gpufeed/detail/codec/result.hpp"

namespace gpufeed::cuda::detail {

// The failure of unit `u` with status `s` (not ok): a fletcher32 mismatch as the CPU path's
// fletcher32 check words it; a zlib stream as libdeflate's result is worded by
// codec::deflate_decoder; an LZ4 block as codec::lz4_block_decode words liblz4's refusal. A unit
// the kernel does not take is the planner's fault, not the data's: a library failure.
inline gpufeed::detail::codec::result unit_failure(const gpufeed::detail::codec::gpu_unit& u,
                                                   unit_status s) {
  namespace codec = gpufeed::detail::codec;
  const auto v = static_cast<std::uint32_t>(s);
  if (s == unit_status::bad_fletcher32)
    return codec::failed("fletcher32", "fletcher32 checksum mismatch");
  if (s == unit_status::unsupported || s == unit_status::ok)
    return codec::library_failure("gpu decoder", std::string(to_string(s)) + " (kind " +
                                                     std::to_string(static_cast<unsigned>(u.kind)) +
                                                     ")");
  if (v >= 10 && v <= 17) {
    // the inflated size: a leading fletcher32's trailer is inflated with the data
    const std::uint64_t want =
        u.dst_size + (u.kind == codec::gpu_unit_kind::deflate_fletcher32 ? 4u : 0u);
    if (v == 16)
      return codec::failed("libdeflate_zlib_decompress",
                           "the stream holds fewer than the expected " + std::to_string(want) +
                               " bytes");
    if (v == 14)
      return codec::failed("libdeflate_zlib_decompress",
                           "the stream holds more than the expected " + std::to_string(want) +
                               " bytes");
    return codec::failed("libdeflate_zlib_decompress",
                         "corrupt deflate data (bad stream, truncated, or Adler-32 mismatch)");
  }
  return codec::failed("LZ4_decompress_safe", "corrupt LZ4 block");
}

// A chunk's outcome from its units (the plan's [first_unit, + unit_count)) and their statuses:
// ok, or the first failing unit's failure in unit order. A trailing fletcher32's check is the
// chunk's first unit, so its mismatch is reported as the CPU path, which checks it first,
// reports it.
inline gpufeed::detail::codec::result chunk_failure(
    std::span<const gpufeed::detail::codec::gpu_unit> units,
    std::span<const std::uint32_t> status) {
  for (std::size_t i = 0; i < units.size() && i < status.size(); ++i)
    if (status[i] != 0) return unit_failure(units[i], static_cast<unit_status>(status[i]));
  return {};
}

}  // namespace gpufeed::cuda::detail
