// gpufeed::cuda::detail — one LZ4 block decoded by a group of cooperating lanes: a warp on the
// GPU, an emulated warp in the host tests. Plain C++ (no CUDA header): the GPU kernels
// (lz4_kernels.cuh) and the host tests compile the same parse and the same index arithmetic.
//
// Every lane runs the same parse of the block (the same bytes, so on a GPU one broadcast load)
// and copies the bytes lane, lane + lanes, ... of each literal run and match; the group's sync()
// then orders that run's writes before the next run's reads. A match copy reads only bytes
// before its own start (an overlapping match, offset < length, repeats the offset's bytes:
// out[op + i] = out[op - offset + i % offset]), so no lane reads what another lane of the same
// run writes.
//
// The accepted blocks are exactly those liblz4's LZ4_decompress_safe accepts for a known
// decoded size (the CPU path): a match must end at least 5 bytes before the block's end, a
// literal run that leaves fewer than 12 output bytes or 8 input bytes must end the block and
// consume its input exactly, an offset reaches no further back than the block's first byte.
// An offset of 0, which no compressor writes, is what liblz4 1.9 makes of it: a run of zeros
// (so the GPU and the CPU path deliver the same bytes for every block).
// Everything is bounds-checked against the block's input and output sizes: a corrupt block
// is a status, never a read or write outside them.
#pragma once

#include <cstdint>

#include "gpufeed/detail/host_device.hpp"

namespace gpufeed::cuda::detail {

// What decoding one unit (a block, a chunk) found. ok is 0 so a status array starts zeroed.
enum class unit_status : std::uint32_t {
  ok = 0,
  truncated = 1,      // the input ends inside a sequence, or a literal run runs past it
  overflow = 2,       // a literal run or a match writes past the unit's decoded size
  bad_offset = 3,     // a match offset reaching before the unit's first byte
  bad_end = 4,        // LZ4's end rules broken (the last 5 bytes are literals, see above)
  short_output = 5,   // the input ends before the unit's decoded size is reached
  unsupported = 6,    // a unit this kernel does not take (the planner should not send it)
  bad_fletcher32 = 7, // the fletcher32 filter's checksum does not match the chunk's bytes
  // 10-17: a zlib stream's inflate_status (inflate.hpp): header, block, code, truncated, too
  // long, distance too far, short, Adler-32.
};

inline const char* to_string(unit_status s) noexcept {
  switch (s) {
    case unit_status::ok: return "ok";
    case unit_status::truncated: return "the LZ4 block is truncated";
    case unit_status::overflow: return "the LZ4 block decodes past its size";
    case unit_status::bad_offset: return "an LZ4 match offset points before the block";
    case unit_status::bad_end: return "the LZ4 block breaks the format's end rules";
    case unit_status::short_output: return "the LZ4 block decodes to fewer bytes than its size";
    case unit_status::unsupported: return "a unit the GPU decoder does not take";
    case unit_status::bad_fletcher32: return "fletcher32 checksum mismatch";
  }
  switch (static_cast<std::uint32_t>(s)) {
    case 10: return "the zlib header is not valid";
    case 11: return "a deflate block type or header is not valid";
    case 12: return "a deflate Huffman code is not valid";
    case 13: return "the deflate stream is truncated";
    case 14: return "the deflate stream decodes past its size";
    case 15: return "a deflate distance points before the stream";
    case 16: return "the deflate stream decodes to fewer bytes than its size";
    case 17: return "the Adler-32 of the deflate stream does not match";
  }
  return "unknown status";
}

// Copies of one run by lane `lane` of `lanes`: literal bytes, and a match at `dst` whose source
// is `offset` bytes back (bytes before dst final; offset 0: zeros).
GPUFEED_HOST_DEVICE inline void lane_copy(const std::uint8_t* src, std::uint8_t* dst,
                                          std::uint32_t n, unsigned lane, unsigned lanes) {
  for (std::uint32_t i = lane; i < n; i += lanes) dst[i] = src[i];
}
GPUFEED_HOST_DEVICE inline void lane_match(std::uint8_t* dst, std::uint32_t offset,
                                           std::uint32_t n, unsigned lane, unsigned lanes) {
  const std::uint8_t* from = dst - offset;
  if (offset == 0) {  // liblz4 writes zeros (see lz4_decode_block)
    for (std::uint32_t i = lane; i < n; i += lanes) dst[i] = 0;
  } else if (offset >= n) {
    for (std::uint32_t i = lane; i < n; i += lanes) dst[i] = from[i];
  } else {
    for (std::uint32_t i = lane; i < n; i += lanes) dst[i] = from[i % offset];
  }
}

// A literal or match length of 15 in the token goes on in bytes of 255 until a smaller one:
// adds them to `run` from in[ip], bounded by the input and by the block's decoded size.
GPUFEED_HOST_DEVICE inline unit_status lz4_extend_length(const std::uint8_t* in,
                                                         std::uint32_t in_size, std::uint32_t& ip,
                                                         std::uint32_t out_size,
                                                         std::uint32_t& run) {
  std::uint32_t b = 255;
  while (b == 255) {
    if (ip >= in_size) return unit_status::truncated;
    b = in[ip++];
    run += b;
    if (run > out_size) return unit_status::overflow;
  }
  return unit_status::ok;
}

// Decodes the LZ4 block in[0, in_size) into out[0, out_size). Group: `lane()`, `lanes()` and
// `sync()`, plus `literals(src, dst, n)` and `match(dst, offset, n)` that run the lane copies
// above for the group (on the host, for each emulated lane in turn).
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Group>
GPUFEED_HOST_DEVICE unit_status lz4_decode_block(const std::uint8_t* in, std::uint32_t in_size,
                                                 std::uint8_t* out, std::uint32_t out_size,
                                                 Group& group) {
  if (out_size == 0)  // liblz4: an empty block is the single token 0
    return in_size == 1 && in[0] == 0 ? unit_status::ok : unit_status::bad_end;
  std::uint32_t ip = 0, op = 0;
  for (;;) {
    if (ip >= in_size) return unit_status::truncated;
    const std::uint32_t token = in[ip++];
    std::uint32_t run = token >> 4;
    if (run == 15)
      if (const unit_status s = lz4_extend_length(in, in_size, ip, out_size, run);
          s != unit_status::ok)
        return s;
    if (run > in_size - ip) return unit_status::truncated;
    if (run > out_size - op) return unit_status::overflow;
    group.literals(in + ip, out + op, run);
    ip += run;
    op += run;
    if (ip == in_size) break;  // the last sequence: literals only
    if (out_size - op < 12 || in_size - ip < 8) return unit_status::bad_end;
    const std::uint32_t offset = std::uint32_t{in[ip]} | (std::uint32_t{in[ip + 1]} << 8);
    ip += 2;
    if (offset > op) return unit_status::bad_offset;
    run = (token & 15u) + 4;
    if ((token & 15u) == 15u)
      if (const unit_status s = lz4_extend_length(in, in_size, ip, out_size, run);
          s != unit_status::ok)
        return s;
    if (run > out_size - op) return unit_status::overflow;
    if (out_size - op - run < 5) return unit_status::bad_end;
    group.sync();  // the runs just written (by other lanes) may be the match's source
    group.match(out + op, offset, run);
    op += run;
  }
  group.sync();
  return op == out_size ? unit_status::ok : unit_status::short_output;
}

// The host's stand-in for a warp: runs each copy for every lane in turn, with the device's
// index arithmetic, so the host tests check what each lane of a warp would write.
struct emulated_warp {
  unsigned width = 32;
  void sync() const noexcept {}
  void literals(const std::uint8_t* src, std::uint8_t* dst, std::uint32_t n) const noexcept {
    for (unsigned l = 0; l < width; ++l) lane_copy(src, dst, n, l, width);
  }
  void match(std::uint8_t* dst, std::uint32_t offset, std::uint32_t n) const noexcept {
    for (unsigned l = 0; l < width; ++l) lane_match(dst, offset, n, l, width);
  }
};

}  // namespace gpufeed::cuda::detail
