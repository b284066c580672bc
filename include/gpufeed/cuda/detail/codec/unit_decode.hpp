// gpufeed::cuda::detail — one unit of a compressed chunk (detail/codec/gpu_units.hpp) decoded by a
// group of lanes: an LZ4 block, a stored run, a Bitshuffle block (uncompressed or in one LZ4
// block), a zlib stream (inflated into dst, or into the stage buffer then unshuffled and
// checked), a fletcher32 check or an unshuffled copy. Plain C++, shared by the GPU kernels
// (unit_kernels.cuh) and the host tests, like lz4_block.hpp.
#pragma once

#include <cstdint>

#include "gpufeed/cuda/detail/codec/filter_lanes.hpp"
#include "gpufeed/cuda/detail/codec/inflate.hpp"
#include "gpufeed/cuda/detail/codec/lz4_block.hpp"
#include "gpufeed/detail/codec/bit_matrix.hpp"
#include "gpufeed/detail/codec/gpu_units.hpp"

namespace gpufeed::cuda::detail {

// Bitshuffle's inverse bit transpose of one block of n elements (n % 8 == 0) of e bytes, by
// lane `lane` of `lanes`: `rows` holds 8e rows of n/8 bytes (row 8b + k: bit k of byte b of each
// element); each lane takes the 8x8 bit squares (b, q) lane, lane + lanes, ... and writes byte b
// of elements 8q .. 8q + 7. The same transform as codec::bit_untranspose, square by square.
GPUFEED_HOST_DEVICE inline void lane_untranspose(const std::uint8_t* rows, std::uint8_t* out,
                                                 std::uint32_t n, std::uint32_t e, unsigned lane,
                                                 unsigned lanes) {
  const std::uint32_t row = n / 8, squares = row * e;
  for (std::uint32_t s = lane; s < squares; s += lanes) {
    const std::uint32_t b = s / row, q = s - b * row;
    const std::uint8_t* in = rows + b * 8 * row + q;
    std::uint64_t x = 0;
    for (int k = 0; k < 8; ++k) x |= std::uint64_t{in[k * row]} << (8 * k);
    x = gpufeed::detail::codec::transpose_8x8_bits(x);
    std::uint8_t* o = out + 8 * q * e + b;
    for (int k = 0; k < 8; ++k) o[k * e] = static_cast<std::uint8_t>(x >> (8 * k));
  }
}

// Shared memory a unit needs while it decodes: a compressed Bitshuffle block its decoded bytes,
// a zlib stream its Huffman tables; other units none.
GPUFEED_HOST_DEVICE inline std::uint32_t unit_scratch_bytes(
    const gpufeed::detail::codec::gpu_unit& u) {
  using gpufeed::detail::codec::gpu_unit_kind;
  if (u.kind == gpu_unit_kind::bitshuffle_lz4) return u.dst_size;
  if (u.kind == gpu_unit_kind::deflate || u.kind == gpu_unit_kind::deflate_unshuffle ||
      u.kind == gpu_unit_kind::deflate_fletcher32)
    return static_cast<std::uint32_t>(sizeof(inflate_tables));
  return 0;
}

// The staged kinds: the zlib stream inflated into stage[u.stage, + gpu_unit_stage_bytes(u)),
// unshuffled from there into dst, and (deflate_fletcher32) the unshuffled data checked against
// the unshuffled trailer, as the CPU path undoes fletcher32 after shuffle after deflate.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Group>
GPUFEED_HOST_DEVICE unit_status decode_staged_unit(const std::uint8_t* in, std::uint8_t* out,
                                                   std::uint8_t* stage,
                                                   const gpufeed::detail::codec::gpu_unit& u,
                                                   std::uint8_t* scratch, Group& group) {
  const bool checked = u.kind == gpufeed::detail::codec::gpu_unit_kind::deflate_fletcher32;
  if (stage == nullptr || (checked && u.dst_size > 0xffffffffu - 4))
    return unit_status::unsupported;
  const std::uint32_t staged = u.dst_size + (checked ? 4u : 0u);
  std::uint8_t* st = stage + u.stage;
  const inflate_status s = inflate_zlib(in, u.src_size, st, staged,
                                        *reinterpret_cast<inflate_tables*>(scratch), group);
  if (s != inflate_status::ok) return static_cast<unit_status>(s);
  group.unshuffle(st, out, staged, u.element_size, u.dst_size);
  group.sync();
  if (!checked) return unit_status::ok;
  std::uint32_t stored = 0;
  for (std::uint32_t k = 0; k < 4; ++k)
    stored |= std::uint32_t{unshuffled_byte(st, staged, u.element_size, u.dst_size + k)} << (8 * k);
  const std::uint32_t sum = group.fletcher32(out, u.dst_size);
  return fletcher32_accepts(stored, sum) ? unit_status::ok : unit_status::bad_fletcher32;
}

// Decodes unit `u` from the compressed buffer `src` into the decoded buffer `dst`, the staged
// kinds through the device stage buffer `stage` (null: those kinds are unsupported). `scratch`
// holds unit_scratch_bytes(u) bytes, 16-byte aligned (shared memory on the GPU). The group is
// inflate.hpp's, with `untranspose(rows, out, n, e)`, `unshuffle(src, dst, n, e, limit)` and
// `fletcher32(data, n)` besides.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Group>
GPUFEED_HOST_DEVICE unit_status decode_unit(const std::uint8_t* src, std::uint8_t* dst,
                                            std::uint8_t* stage,
                                            const gpufeed::detail::codec::gpu_unit& u,
                                            std::uint8_t* scratch, Group& group) {
  using gpufeed::detail::codec::gpu_unit_kind;
  const std::uint8_t* in = src + u.src;
  std::uint8_t* out = dst + u.dst;
  switch (u.kind) {
    case gpu_unit_kind::stored:
      if (u.src_size != u.dst_size) return unit_status::unsupported;
      group.literals(in, out, u.dst_size);
      group.sync();
      return unit_status::ok;
    case gpu_unit_kind::lz4_block:
      return lz4_decode_block(in, u.src_size, out, u.dst_size, group);
    case gpu_unit_kind::deflate: {
      const inflate_status s = inflate_zlib(in, u.src_size, out, u.dst_size,
                                            *reinterpret_cast<inflate_tables*>(scratch), group);
      return s == inflate_status::ok ? unit_status::ok : static_cast<unit_status>(s);
    }
    case gpu_unit_kind::deflate_unshuffle:
    case gpu_unit_kind::deflate_fletcher32:
      return decode_staged_unit(in, out, stage, u, scratch, group);
    case gpu_unit_kind::fletcher32: {
      if (u.src_size < 4) return unit_status::bad_fletcher32;  // as fletcher32_matches
      const std::uint32_t sum = group.fletcher32(in, u.src_size - 4);
      return fletcher32_accepts(read_le32(in + u.src_size - 4), sum) ? unit_status::ok
                                                                     : unit_status::bad_fletcher32;
    }
    case gpu_unit_kind::unshuffle:
      if (u.src_size != u.dst_size) return unit_status::unsupported;
      group.unshuffle(in, out, u.dst_size, u.element_size, u.dst_size);
      group.sync();
      return unit_status::ok;
    case gpu_unit_kind::bitshuffle:
    case gpu_unit_kind::bitshuffle_lz4: {
      const std::uint32_t e = u.element_size;
      if (e == 0 || u.dst_size % (8 * e) || u.dst_size > gpufeed::detail::codec::gpu_unit_max_bytes)
        return unit_status::unsupported;
      const std::uint8_t* rows = in;
      if (u.kind == gpu_unit_kind::bitshuffle_lz4) {
        const unit_status s = lz4_decode_block(in, u.src_size, scratch, u.dst_size, group);
        if (s != unit_status::ok) return s;
        rows = scratch;
      } else if (u.src_size != u.dst_size) {
        return unit_status::unsupported;
      }
      group.untranspose(rows, out, u.dst_size / e, e);
      group.sync();
      return unit_status::ok;
    }
  }
  return unit_status::unsupported;
}

// The host's stand-in for a warp, with the untranspose, unshuffle and fletcher32 (see
// emulated_warp).
struct emulated_unit_warp : emulated_inflate_warp {
  void untranspose(const std::uint8_t* rows, std::uint8_t* out, std::uint32_t n,
                   std::uint32_t e) const noexcept {
    for (unsigned l = 0; l < width; ++l) lane_untranspose(rows, out, n, e, l, width);
  }
  void unshuffle(const std::uint8_t* src, std::uint8_t* out, std::uint32_t n, std::uint32_t e,
                 std::uint32_t limit) const noexcept {
    for (unsigned l = 0; l < width; ++l) lane_unshuffle(src, out, n, e, limit, l, width);
  }
  std::uint32_t fletcher32(const std::uint8_t* data, std::uint32_t n) const noexcept {
    std::uint64_t a = 0, w = 0;
    bool nonzero = false;
    for (unsigned l = 0; l < width; ++l) {
      const fletcher_part p = lane_fletcher(data, n, l, width);
      a += p.a;
      w += p.w;
      nonzero = nonzero || p.nonzero;
    }
    return fletcher_from(a, w, nonzero);
  }
};

}  // namespace gpufeed::cuda::detail
