// gpufeed — undoing HDF5's shuffle filter (H5Zshuffle.c) fast: the stored bytes are byte planes
// (byte 0 of every element, then byte 1, ...) followed by the n % element_size leftover bytes
// unchanged; buffers of one element or fewer, or elements of one byte, are stored as they are.
//
// Why not one generic loop: it writes one byte per iteration at a stride, about 0.6 GB/s, and
// on h5py's gzip+shuffle chunks that was a fifth of a worker's time (in perf). Element
// sizes 2, 4 and 8 (float16/32/64, int16/32/64) interleave 16 elements per step with SSE2
// unpacks, present on every x86-64, whatever flags the user compiles with (-O2 does not
// vectorise the loop); other sizes and other CPUs use a loop over elements that the compiler can
// vectorise at -O3.
#pragma once

#include <cstddef>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gpufeed::detail::hdf5 {

namespace unshuffle_detail {

// Elements [from, elements) of the planes, one element at a time.
template <std::size_t E>
void tail(const std::byte* src, std::byte* dst, std::size_t elements, std::size_t from) noexcept {
  for (std::size_t i = from; i < elements; ++i)
    for (std::size_t b = 0; b < E; ++b) dst[i * E + b] = src[b * elements + i];
}

inline void generic(const std::byte* src, std::byte* dst, std::size_t elements,
                    std::size_t e) noexcept {
  for (std::size_t i = 0; i < elements; ++i)
    for (std::size_t b = 0; b < e; ++b) dst[i * e + b] = src[b * elements + i];
}

#if defined(__SSE2__)
inline __m128i load(const std::byte* p) noexcept {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline void store(std::byte* p, __m128i v) noexcept {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
}

// 16 elements per step: the planes' next 16 bytes each, interleaved by unpacking bytes, then
// 16-bit and 32-bit pairs (one level per doubling of the element size).
template <std::size_t E>
void sse2(const std::byte* src, std::byte* dst, std::size_t elements) noexcept {
  static_assert(E == 2 || E == 4 || E == 8);
  std::size_t i = 0;
  for (; i + 16 <= elements; i += 16) {
    __m128i p[E];
    for (std::size_t b = 0; b < E; ++b) p[b] = load(src + b * elements + i);
    std::byte* out = dst + i * E;
    if constexpr (E == 2) {
      store(out, _mm_unpacklo_epi8(p[0], p[1]));
      store(out + 16, _mm_unpackhi_epi8(p[0], p[1]));
    } else if constexpr (E == 4) {
      const __m128i ab_lo = _mm_unpacklo_epi8(p[0], p[1]), ab_hi = _mm_unpackhi_epi8(p[0], p[1]);
      const __m128i cd_lo = _mm_unpacklo_epi8(p[2], p[3]), cd_hi = _mm_unpackhi_epi8(p[2], p[3]);
      store(out, _mm_unpacklo_epi16(ab_lo, cd_lo));
      store(out + 16, _mm_unpackhi_epi16(ab_lo, cd_lo));
      store(out + 32, _mm_unpacklo_epi16(ab_hi, cd_hi));
      store(out + 48, _mm_unpackhi_epi16(ab_hi, cd_hi));
    } else {
      // bytes b, b+1 of 8 elements per register, then 4 bytes, then whole 8-byte elements
      __m128i q[8], r[8];
      for (int k = 0; k < 4; ++k) {
        q[2 * k] = _mm_unpacklo_epi8(p[2 * k], p[2 * k + 1]);
        q[2 * k + 1] = _mm_unpackhi_epi8(p[2 * k], p[2 * k + 1]);
      }
      // q[0],q[1]: bytes 0-1 of elements 0-7, 8-15; q[2],q[3]: bytes 2-3; ...
      for (int h = 0; h < 2; ++h) {  // h: elements 0-7, then 8-15
        r[4 * h + 0] = _mm_unpacklo_epi16(q[h], q[2 + h]);  // bytes 0-3, elements 0-3 (+8h)
        r[4 * h + 1] = _mm_unpackhi_epi16(q[h], q[2 + h]);  // bytes 0-3, elements 4-7
        r[4 * h + 2] = _mm_unpacklo_epi16(q[4 + h], q[6 + h]);  // bytes 4-7, elements 0-3
        r[4 * h + 3] = _mm_unpackhi_epi16(q[4 + h], q[6 + h]);  // bytes 4-7, elements 4-7
      }
      for (int h = 0; h < 2; ++h)
        for (int half = 0; half < 2; ++half) {  // elements 0-3 then 4-7 of this h
          const __m128i lo = r[4 * h + half], hi = r[4 * h + 2 + half];
          std::byte* o = out + (8 * h + 4 * half) * 8;
          store(o, _mm_unpacklo_epi32(lo, hi));
          store(o + 16, _mm_unpackhi_epi32(lo, hi));
        }
    }
  }
  tail<E>(src, dst, elements, i);
}
#endif

template <std::size_t E>
void planes(const std::byte* src, std::byte* dst, std::size_t elements) noexcept {
#if defined(__SSE2__)
  sse2<E>(src, dst, elements);
#else
  tail<E>(src, dst, elements, 0);
#endif
}

}  // namespace unshuffle_detail

// dst and src hold n bytes each and do not overlap.
inline void unshuffle(const std::byte* src, std::byte* dst, std::size_t n,
                      std::size_t element_size) noexcept {
  const std::size_t elements = element_size ? n / element_size : 0;
  if (element_size <= 1 || elements <= 1) {
    if (n) std::memcpy(dst, src, n);
    return;
  }
  switch (element_size) {
    case 2: unshuffle_detail::planes<2>(src, dst, elements); break;
    case 4: unshuffle_detail::planes<4>(src, dst, elements); break;
    case 8: unshuffle_detail::planes<8>(src, dst, elements); break;
    default: unshuffle_detail::generic(src, dst, elements, element_size); break;
  }
  const std::size_t done = elements * element_size;
  if (n > done) std::memcpy(dst + done, src + done, n - done);
}

}  // namespace gpufeed::detail::hdf5
