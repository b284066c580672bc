// gpufeed::cuda::detail — one piece of one gather run (detail/device_decode/work_image.hpp)
// copied by a group of cooperating lanes: a group of a warp on the GPU (gather_kernels.cuh), an
// emulated group in the host tests. Plain C++ (no CUDA header), like lz4_block.hpp: the kernel
// and the host tests compile the same bounds check, piece arithmetic and copy.
//
// Lanes copy disjoint bytes and read only the source, so lanes run one after another on the
// host give the GPU's result.
#pragma once

#include <cstdint>
#include <cstring>

#include "gpufeed/detail/device_decode/work_image.hpp"
#include "gpufeed/detail/host_device.hpp"

namespace gpufeed::cuda::detail {

// Words of 16 and 8 bytes: CUDA's vector types on the GPU (one 128- or 64-bit access).
#if defined(__CUDACC__)
using gather_word16 = uint4;
using gather_word8 = uint2;
#else
struct alignas(16) gather_word16 {
  std::uint64_t lo, hi;
};
struct alignas(8) gather_word8 {
  std::uint64_t v;
};
#endif

// *to = *from for an aligned word (memcpy on the host, where the bytes are not typed as T).
template <class T>
GPUFEED_HOST_DEVICE inline void gather_move(T* to, const T* from) {
#if defined(__CUDA_ARCH__)
  *to = *from;
#else
  std::memcpy(static_cast<void*>(to), static_cast<const void*>(from), sizeof(T));
#endif
}

// The low 32 bits of (hi:lo) >> shift, shift < 32 (__funnelshift_r on the GPU).
GPUFEED_HOST_DEVICE inline std::uint32_t gather_funnel(std::uint32_t lo, std::uint32_t hi,
                                                        unsigned shift) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(lo, hi, shift);
#else
  return static_cast<std::uint32_t>(((std::uint64_t{hi} << 32) | lo) >> shift);
#endif
}

// Copies `words` words of T from src to dst (both T-aligned) by lane `lane` of `lanes`; four
// loads of each lane in flight before its stores.
template <class T>
GPUFEED_HOST_DEVICE inline void lanes_copy_words(const T* src, T* dst, std::uint64_t words,
                                                 unsigned lane, unsigned lanes) {
  constexpr unsigned unroll = 4;
  const std::uint64_t stride = lanes;
  std::uint64_t i = lane;
  for (; i + stride * (unroll - 1) < words; i += stride * unroll) {
    T v[unroll];
    for (unsigned k = 0; k < unroll; ++k) gather_move(&v[k], &src[i + stride * k]);
    for (unsigned k = 0; k < unroll; ++k) gather_move(&dst[i + stride * k], &v[k]);
  }
  for (; i < words; i += stride) gather_move(&dst[i], &src[i]);
}

// Copies n bytes whose source and destination differ in alignment below 4 bytes: bytes until
// dst is 4-byte aligned, then each 4-byte word of dst put together from the two aligned source
// words it straddles (a funnel shift), then the last bytes. The second word of the last shift
// holds a byte of the source, so no read leaves the aligned words the source lies in.
GPUFEED_HOST_DEVICE inline void lanes_copy_shifted(const std::uint8_t* src, std::uint8_t* dst,
                                                   std::uint64_t n, unsigned lane,
                                                   unsigned lanes) {
  std::uint64_t head = (4 - (reinterpret_cast<std::uintptr_t>(dst) & 3)) & 3;
  if (head > n) head = n;
  for (std::uint64_t i = lane; i < head; i += lanes) dst[i] = src[i];
  src += head;
  dst += head;
  n -= head;
  const auto skew = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(src) & 3);
  const auto* from = reinterpret_cast<const std::uint32_t*>(src - skew);
  auto* to = reinterpret_cast<std::uint32_t*>(dst);
  const std::uint64_t words = n / 4, stride = lanes;
  constexpr unsigned unroll = 4;  // loads in flight before the stores, as lanes_copy_words
  std::uint64_t i = lane;
  for (; i + stride * (unroll - 1) < words; i += stride * unroll) {
    std::uint32_t lo[unroll], hi[unroll];
    for (unsigned k = 0; k < unroll; ++k) {
      gather_move(&lo[k], &from[i + stride * k]);
      gather_move(&hi[k], &from[i + stride * k + 1]);
    }
    for (unsigned k = 0; k < unroll; ++k) {
      const std::uint32_t out = gather_funnel(lo[k], hi[k], 8 * skew);
      gather_move(&to[i + stride * k], &out);
    }
  }
  for (; i < words; i += stride) {
    std::uint32_t lo, hi;
    gather_move(&lo, &from[i]);
    gather_move(&hi, &from[i + 1]);
    const std::uint32_t out = gather_funnel(lo, hi, 8 * skew);
    gather_move(&to[i], &out);
  }
  for (std::uint64_t b = words * 4 + lane; b < n; b += lanes) dst[b] = src[b];
}

// Copies n bytes by lane `lane` of `lanes` at any alignment: bytes until dst reaches the widest
// word (16, 8 or 4 bytes) that src can share, those words, then the remaining bytes; below 4,
// lanes_copy_shifted.
GPUFEED_HOST_DEVICE inline void lanes_copy(const std::uint8_t* src, std::uint8_t* dst,
                                           std::uint64_t n, unsigned lane, unsigned lanes) {
  const auto s = reinterpret_cast<std::uintptr_t>(src), d = reinterpret_cast<std::uintptr_t>(dst);
  std::uint64_t w = 16;
  while (w > 4 && ((s ^ d) & (w - 1)) != 0) w /= 2;
  if (((s ^ d) & (w - 1)) != 0) {
    lanes_copy_shifted(src, dst, n, lane, lanes);
    return;
  }
  std::uint64_t head = (w - (d & (w - 1))) & (w - 1);
  if (head > n) head = n;
  for (std::uint64_t i = lane; i < head; i += lanes) dst[i] = src[i];
  src += head;
  dst += head;
  n -= head;
  const std::uint64_t words = n / w, body = words * w;
  if (w == 16)
    lanes_copy_words(reinterpret_cast<const gather_word16*>(src),
                     reinterpret_cast<gather_word16*>(dst), words, lane, lanes);
  else if (w == 8)
    lanes_copy_words(reinterpret_cast<const gather_word8*>(src),
                     reinterpret_cast<gather_word8*>(dst), words, lane, lanes);
  else
    lanes_copy_words(reinterpret_cast<const std::uint32_t*>(src),
                     reinterpret_cast<std::uint32_t*>(dst), words, lane, lanes);
  for (std::uint64_t i = body + lane; i < n; i += lanes) dst[i] = src[i];
}

// True when run r lies inside the cache (cache_bytes) and the batch's data region (dst_bytes);
// overflow-free for any run.
GPUFEED_HOST_DEVICE inline bool gather_run_inside(
    const gpufeed::detail::device_decode::gather_run& r, std::uint64_t cache_bytes,
    std::uint64_t dst_bytes) {
  return r.len <= cache_bytes && r.src <= cache_bytes - r.len && r.len <= dst_bytes &&
         r.dst <= dst_bytes - r.len;
}

// Piece `piece` of `pieces` of run r (inside: gather_run_inside), cache to dst, by lane `lane`
// of `lanes`. Pieces are 16-byte multiples from the run's start, so each keeps its alignment;
// the last ones may be empty.
GPUFEED_HOST_DEVICE inline void gather_piece(const std::uint8_t* cache, std::uint8_t* dst,
                                             const gpufeed::detail::device_decode::gather_run& r,
                                             std::uint32_t piece, std::uint32_t pieces,
                                             unsigned lane, unsigned lanes) {
  const std::uint64_t step = ((r.len + pieces - 1) / pieces + 15) / 16 * 16;
  const std::uint64_t at = std::uint64_t{piece} * step;
  if (at >= r.len) return;
  const std::uint64_t n = r.len - at < step ? r.len - at : step;
  lanes_copy(cache + r.src + at, dst + r.dst + at, n, lane, lanes);
}

}  // namespace gpufeed::cuda::detail
