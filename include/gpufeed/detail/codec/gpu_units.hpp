// gpufeed::detail::codec — compressed HDF5 chunks cut into units a GPU decodes side by side.
// The planner reads a chunk's framing on the host (a few headers per chunk, bounds-checked the
// way the CPU decoders check them) and lists one unit per independently decodable piece: each
// LZ4 block of the LZ4 filter (32004), each block of the Bitshuffle filter (32008, none or LZ4),
// each run stored raw. A unit names where its bytes lie in the buffer of compressed bytes the
// GPU receives and where its decoded bytes go; the kernels (cuda/detail/codec/) decode one unit
// per warp. Host only: no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/codec/result.hpp"
#include "gpufeed/detail/host_device.hpp"

namespace gpufeed::detail::codec {

enum class gpu_unit_kind : std::uint32_t {
  lz4_block = 0,       // one raw LZ4 block, decoded to exactly dst_size bytes
  stored = 1,          // dst_size bytes copied as they are (src_size == dst_size)
  bitshuffle = 2,      // a Bitshuffle block stored uncompressed, bits to untranspose
  bitshuffle_lz4 = 3,  // a Bitshuffle block in one LZ4 block, decoded then untransposed
  deflate = 4,         // one zlib stream (the deflate filter's chunk), inflated and Adler-checked
  fletcher32 = 5,      // src_size stored bytes whose last 4 are the fletcher32 filter's checksum
                       // of the others, checked; writes nothing (dst_size 0)
  unshuffle = 6,       // dst_size bytes byte-unshuffled (element_size) as they are copied
  deflate_unshuffle = 7,   // a zlib stream of dst_size bytes inflated into the stage buffer,
                           // then unshuffled (element_size; 1: copied) into dst
  deflate_fletcher32 = 8,  // a zlib stream of dst_size + 4 bytes (the data, then its fletcher32,
                           // shuffled together when element_size > 1) inflated into the stage
                           // buffer, unshuffled into dst (the data only) and checked
};

struct gpu_unit {
  std::uint64_t src = 0;  // offset of the unit's bytes in the compressed buffer
  std::uint64_t dst = 0;  // offset of its decoded bytes in the decoded buffer
  std::uint32_t src_size = 0, dst_size = 0;
  gpu_unit_kind kind = gpu_unit_kind::stored;
  std::uint32_t element_size = 0;  // Bitshuffle kinds: bytes per element (dst_size / it % 8 == 0);
                                   // shuffle kinds: the shuffle filter's element size
  std::uint64_t stage = 0;  // staged kinds: offset of gpu_unit_stage_bytes(*this) bytes in the
                            // device stage buffer that nothing else uses while the unit decodes
};

// Bytes of device stage buffer a unit inflates into before its last step (unshuffle, the
// fletcher32 check): the staged kinds' inflated size; 0 for the kinds that decode into dst.
GPUFEED_HOST_DEVICE inline std::uint64_t gpu_unit_stage_bytes(const gpu_unit& u) noexcept {
  if (u.kind == gpu_unit_kind::deflate_unshuffle) return u.dst_size;
  if (u.kind == gpu_unit_kind::deflate_fletcher32) return std::uint64_t{u.dst_size} + 4;
  return 0;
}

// The largest Bitshuffle block the kernels take: a compressed one is decoded into shared memory
// before its bits are untransposed. Chunks with larger blocks keep the CPU path (the planner
// says so). LZ4 blocks have no such bound (they decode straight into the output), but few large
// blocks leave few warps in flight: blocks of 64 KiB or less give the GPU its parallelism.
inline constexpr std::uint32_t gpu_unit_max_bytes = 64 * 1024;

// Lists the units of one LZ4-filter chunk `src` (its bytes at `src_base` in the compressed buffer)
// that decodes to `decoded` bytes at `dst_base`. Fails, with the CPU decoder's words, on a
// framing the CPU decoder refuses, and on blocks of 4 GiB or more.
inline result plan_lz4_chunk(std::span<const std::byte> src, std::uint64_t src_base,
                             std::uint64_t dst_base, std::uint64_t decoded,
                             std::vector<gpu_unit>& units) {
  if (src.size() < 12) return failed("lz4 filter", "chunk shorter than the 12-byte LZ4 header");
  const std::uint64_t total = read_be64(src.data());
  std::uint64_t block = read_be32(src.data() + 8);
  if (total != decoded)
    return failed("lz4 filter", "header says " + std::to_string(total) + " bytes, expected " +
                                    std::to_string(decoded));
  if (block > total) block = total;
  if (block == 0 && total != 0) return failed("lz4 filter", "header gives a zero block size");
  if (block > 0xffffffffu)
    return failed("lz4 filter", "blocks of " + std::to_string(block) +
                                    " bytes are larger than the GPU decoder takes");
  std::size_t at = 12;
  std::uint64_t out = 0;
  while (out < total) {
    const std::uint64_t want = block < total - out ? block : total - out;
    if (src.size() - at < 4) return failed("lz4 filter", "chunk truncated before a block header");
    const std::size_t c = read_be32(src.data() + at);
    at += 4;
    if (c > src.size() - at)
      return failed("lz4 filter", "a block of " + std::to_string(c) + " bytes runs past the chunk");
    gpu_unit u;
    u.src = src_base + at;
    u.dst = dst_base + out;
    u.src_size = static_cast<std::uint32_t>(c);
    u.dst_size = static_cast<std::uint32_t>(want);
    u.kind = c == want ? gpu_unit_kind::stored : gpu_unit_kind::lz4_block;
    units.push_back(u);
    at += c;
    out += want;
  }
  return {};
}

// The one unit of a deflate-filter chunk: its whole zlib stream (bytes after the stream's end
// are ignored, as by the CPU decoder). Inflating is serial within a stream, so a chunk is one
// unit: the GPU's parallelism is across chunks.
inline result plan_deflate_chunk(std::span<const std::byte> src, std::uint64_t src_base,
                                 std::uint64_t dst_base, std::uint64_t decoded,
                                 std::vector<gpu_unit>& units) {
  if (src.size() > 0xffffffffu || decoded > 0xffffffffu)
    return failed("deflate filter", "a chunk of 4 GiB or more has no GPU decoder");
  gpu_unit u;
  u.src = src_base;
  u.dst = dst_base;
  u.src_size = static_cast<std::uint32_t>(src.size());
  u.dst_size = static_cast<std::uint32_t>(decoded);
  u.kind = gpu_unit_kind::deflate;
  units.push_back(u);
  return {};
}

// Lists the units of one Bitshuffle-filter chunk (cd_values: element size `e`, block size in
// elements `block` (0: bitshuffle's default), `compression` 0 none or 2 LZ4). Zstd blocks
// (compression 3) have no GPU decoder: the planner refuses them and the chunk keeps the CPU path.
inline std::size_t gpu_bitshuffle_default_block(std::size_t e) noexcept {
  const std::size_t b = (8192 / e) / 8 * 8;
  return b < 128 ? 128 : b;
}
inline result plan_bitshuffle_chunk(std::span<const std::byte> src, std::uint64_t src_base,
                                    std::uint64_t dst_base, std::uint64_t decoded, std::size_t e,
                                    std::size_t block, unsigned compression,
                                    std::vector<gpu_unit>& units) {
  if (e == 0) return failed("bitshuffle filter", "element size 0 in the filter's parameters");
  if (decoded % e)
    return failed("bitshuffle filter", "chunk of " + std::to_string(decoded) +
                                           " bytes is not a whole number of elements");
  if (compression != 0 && compression != 2)
    return failed("bitshuffle filter", "compression " + std::to_string(compression) +
                                           " has no GPU decoder");
  const std::uint64_t count = decoded / e;
  std::size_t at = 0;
  if (compression == 0) {
    if (src.size() != decoded)
      return failed("bitshuffle filter", "stored " + std::to_string(src.size()) +
                                             " bytes, expected " + std::to_string(decoded));
    if (block == 0) block = gpu_bitshuffle_default_block(e);
  } else {
    if (src.size() < 12) return failed("bitshuffle filter", "chunk shorter than its header");
    const std::uint64_t total = read_be64(src.data());
    const std::size_t block_bytes = read_be32(src.data() + 8);
    if (total != decoded)
      return failed("bitshuffle filter", "header says " + std::to_string(total) +
                                             " bytes, expected " + std::to_string(decoded));
    block = block_bytes / e;
    if (block_bytes % e || block == 0 || block % 8)
      return failed("bitshuffle filter",
                    "header block size " + std::to_string(block_bytes) + " is not valid");
    at = 12;
  }
  if (block % 8) return failed("bitshuffle filter", "block size not a multiple of 8");
  if (block * e > gpu_unit_max_bytes)
    return failed("bitshuffle filter", "blocks of " + std::to_string(block * e) +
                                           " bytes are larger than the GPU decoder takes");
  std::uint64_t out = 0;
  for (std::uint64_t i = 0; i < count; i += block) {
    std::uint64_t n = count - i < block ? count - i : block;
    n -= n % 8;
    if (n == 0) break;
    gpu_unit u;
    u.dst = dst_base + out;
    u.dst_size = static_cast<std::uint32_t>(n * e);
    u.element_size = static_cast<std::uint32_t>(e);
    if (compression == 0) {
      u.src = src_base + at;
      u.src_size = u.dst_size;
      u.kind = gpu_unit_kind::bitshuffle;
      at += u.dst_size;
    } else {
      if (src.size() - at < 4) return failed("bitshuffle filter", "truncated before a block");
      const std::size_t c = read_be32(src.data() + at);
      at += 4;
      if (c > src.size() - at)
        return failed("bitshuffle filter", "a block runs past the end of the chunk");
      u.src = src_base + at;
      u.src_size = static_cast<std::uint32_t>(c);
      u.kind = gpu_unit_kind::bitshuffle_lz4;
      at += c;
    }
    units.push_back(u);
    out += u.dst_size;
  }
  const std::uint64_t left = decoded - out;  // the count % 8 elements stored raw
  if (src.size() - at < left)
    return failed("bitshuffle filter", "truncated in the trailing elements");
  if (left) {
    gpu_unit u;
    u.src = src_base + at;
    u.dst = dst_base + out;
    u.src_size = u.dst_size = static_cast<std::uint32_t>(left);
    u.kind = gpu_unit_kind::stored;
    units.push_back(u);
  }
  return {};
}

}  // namespace gpufeed::detail::codec
