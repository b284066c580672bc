// gpufeed — one chunk of a filtered HDF5 dataset planned for the GPU decoders: the chunk's filter
// pipeline (shard_index::pipeline, in the order the filters were applied, and the chunk's filter
// mask) matched against the pipelines the kernels decode, and the chunk cut into units
// (detail/codec/gpu_units.hpp). Host only.
//
// The pipelines with a GPU decoder, in the order applied when writing (filters the chunk's mask
// skips do not count):
//   lz4 | bitshuffle (none or LZ4) | deflate | shuffle, deflate | shuffle
//   fletcher32, deflate | fletcher32, shuffle, deflate   (h5py 2's order: the checksum first)
//   any of the above, then fletcher32                     (h5py 3's order: the checksum last)
//   fletcher32 alone, or no filter
// A trailing fletcher32 is one `fletcher32` unit over the stored bytes, listed first among the
// chunk's units, which a warp checks beside the others; a leading one is checked after the data is
// inflated and unshuffled (deflate_fletcher32). Shuffle before deflate inflates into the device
// stage buffer and unshuffles from it into the destination, in the same warp. The chunk's outcome
// is chunk_failure's over its units' statuses (cuda/detail/codec/unit_failure.hpp); a chunk that
// fails may have written meaningless bytes, within its own destination range only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/codec/bitshuffle.hpp"
#include "gpufeed/detail/codec/gpu_units.hpp"
#include "gpufeed/detail/codec/registry.hpp"
#include "gpufeed/detail/codec/result.hpp"
#include "gpufeed/detail/hdf5/filter_step.hpp"

namespace gpufeed::detail::hdf5 {

struct gpu_chunk_plan {
  // ok; or why the chunk has no GPU decode: a pipeline or size the kernels do not take, or bytes
  // the CPU path refuses, in the CPU path's words and api (its corrupt_error). Either way the
  // chunk can take the CPU path, which decodes it or refuses it in those words.
  codec::result status;
  std::uint64_t stage_bytes = 0;  // stage buffer its units use: [stage_base, + stage_bytes)
  std::size_t first_unit = 0, unit_count = 0;  // its units in the list (none unless ok)
};

inline const char* gpu_filter_name(const filter_step& f) noexcept {
  if (f.kind == codec::kind::bitshuffle) return codec::bitshuffle_name(f.compression);
  if (codec::decoded(f.kind)) return codec::name_of(f.kind);
  return "a filter gpufeed does not decode";
}

namespace gpu_plan_detail {

// The shuffle filter's element size as the kernels take it: 1 where hdf5::unshuffle copies the
// n bytes as they are (an element size of 0 or 1, or fewer than two elements).
inline std::uint32_t shuffle_element(std::size_t e, std::uint64_t n) noexcept {
  if (e <= 1 || n / e <= 1) return 1;
  return static_cast<std::uint32_t>(e);  // e <= n / 2 < 2^32
}

inline codec::result refuse(std::span<const filter_step* const> active, const std::string& why) {
  std::string list;
  for (const filter_step* f : active)
    list += (list.empty() ? "" : ", ") + std::string(gpu_filter_name(*f));
  return codec::failed("gpu chunk plan", "filter pipeline (" + (list.empty() ? "none" : list) +
                                             ") " + why);
}

}  // namespace gpu_plan_detail

// Plans one chunk: `stored` its bytes as read from the file (at `src_base` in the compressed
// buffer the GPU receives), decoding to `chunk_bytes` bytes at `dst_base` in the destination,
// staged kinds at `stage_base` in the stage buffer. Appends the chunk's units to `units` (none on
// failure). Every size (the pipeline's length, the chunk's stored and decoded sizes, the offsets
// they lead to, the shuffle's element size) is bounded before it is used.
inline gpu_chunk_plan plan_gpu_chunk(std::span<const filter_step> pipeline,
                                     std::uint32_t filter_mask, std::span<const std::byte> stored,
                                     std::uint64_t chunk_bytes, std::uint64_t src_base,
                                     std::uint64_t dst_base, std::uint64_t stage_base,
                                     std::vector<codec::gpu_unit>& units) {
  namespace gd = gpu_plan_detail;
  using codec::gpu_unit;
  using codec::gpu_unit_kind;
  constexpr std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
  gpu_chunk_plan plan;
  plan.first_unit = units.size();
  if (pipeline.size() > 32) {  // the filter mask has 32 bits (the CPU path refuses these too)
    plan.status = codec::failed("gpu chunk plan", "more than 32 filters");
    return plan;
  }
  std::array<const filter_step*, 32> active_steps{};  // no allocation per chunk
  std::size_t n = 0;
  for (std::size_t k = 0; k < pipeline.size(); ++k)
    if (!(filter_mask & (1u << k))) active_steps[n++] = &pipeline[k];
  std::span<const filter_step* const> active(active_steps.data(), n);
  // Room for a leading fletcher32's trailer in the 32-bit sizes of a unit.
  if (chunk_bytes == 0 || chunk_bytes > 0xffffffffu - 4 || stored.size() > 0xffffffffu ||
      src_base > top - stored.size() || dst_base > top - chunk_bytes ||
      stage_base > top - (chunk_bytes + 4)) {
    plan.status = gd::refuse(active, "has no GPU decoder for a chunk of " +
                                         std::to_string(chunk_bytes) + " bytes (" +
                                         std::to_string(stored.size()) +
                                         " stored) at these buffer offsets");
    return plan;
  }
  auto fail = [&](codec::result r) {
    units.resize(plan.first_unit);
    plan.status = std::move(r);
    plan.stage_bytes = 0;
    return plan;
  };
  auto push = [&](gpu_unit_kind kind, std::uint64_t src_size, std::uint64_t dst_size,
                  std::uint32_t e) {
    gpu_unit u;
    u.src = src_base;
    u.dst = dst_base;
    u.src_size = static_cast<std::uint32_t>(src_size);
    u.dst_size = static_cast<std::uint32_t>(dst_size);
    u.kind = kind;
    u.element_size = e;
    u.stage = stage_base;
    plan.stage_bytes = codec::gpu_unit_stage_bytes(u);
    units.push_back(u);
  };
  // A trailing fletcher32 (applied last, undone first): its check covers the stored bytes.
  std::span<const std::byte> payload = stored;
  if (!active.empty() && active.back()->kind == codec::kind::fletcher32) {
    if (stored.size() < 4)  // fletcher32_matches refuses it, and the CPU path says so
      return fail(codec::failed("fletcher32", "fletcher32 checksum mismatch"));
    push(gpu_unit_kind::fletcher32, stored.size(), 0, 0);
    active = active.first(--n);
    payload = stored.first(stored.size() - 4);
  }
  auto is = [&](std::size_t i, codec::kind k) { return active[i]->kind == k; };
  const std::uint64_t c = payload.size();
  codec::result r;
  if (n == 0 || (n == 1 && is(0, codec::kind::shuffle))) {
    // Stored as it is, or shuffled: the CPU path's size checks for a chunk with no compressor.
    if (c != chunk_bytes)
      return fail(codec::failed("filter pipeline",
                                n == 0 ? "decoded " + std::to_string(c) + " bytes, expected " +
                                             std::to_string(chunk_bytes)
                                       : "decoded size " + std::to_string(c) +
                                             " != chunk size " + std::to_string(chunk_bytes)));
    if (n == 0)
      push(gpu_unit_kind::stored, c, c, 0);
    else
      push(gpu_unit_kind::unshuffle, c, c, gd::shuffle_element(active[0]->element_size, c));
  } else if (n == 1 && is(0, codec::kind::lz4)) {
    r = codec::plan_lz4_chunk(payload, src_base, dst_base, chunk_bytes, units);
  } else if (n == 1 && is(0, codec::kind::bitshuffle)) {
    r = codec::plan_bitshuffle_chunk(payload, src_base, dst_base, chunk_bytes,
                                     active[0]->element_size, active[0]->block,
                                     active[0]->compression, units);
  } else if (n == 1 && is(0, codec::kind::deflate)) {
    r = codec::plan_deflate_chunk(payload, src_base, dst_base, chunk_bytes, units);
  } else if (n == 2 && is(0, codec::kind::shuffle) && is(1, codec::kind::deflate)) {
    push(gpu_unit_kind::deflate_unshuffle, c, chunk_bytes,
         gd::shuffle_element(active[0]->element_size, chunk_bytes));
  } else if (n >= 2 && n <= 3 && is(0, codec::kind::fletcher32) &&
             is(n - 1, codec::kind::deflate) && (n == 2 || is(1, codec::kind::shuffle))) {
    // Inflated to the data and its trailer (shuffled together when shuffle follows).
    push(gpu_unit_kind::deflate_fletcher32, c, chunk_bytes,
         n == 3 ? gd::shuffle_element(active[1]->element_size, chunk_bytes + 4) : 1u);
  } else {
    return fail(gd::refuse(active, "has no GPU decoder"));
  }
  if (!r.ok) return fail(std::move(r));
  plan.unit_count = units.size() - plan.first_unit;
  return plan;
}

}  // namespace gpufeed::detail::hdf5
