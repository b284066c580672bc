// gpufeed::cuda::detail — one zlib stream (HDF5's deflate filter, id 1) inflated by a group of
// lanes: a warp on the GPU, an emulated warp in the host tests (lz4_block.hpp's groups, plus
// `one(f)`, run by one lane, and `sum(x)`, the group's total). Plain C++.
//
// Huffman decoding is serial within a stream, so every lane runs the same decode (the same
// bits, one broadcast load); lane 0 writes literals, all lanes copy a match's bytes side by side
// (reading only bytes before the match), and the Adler-32 is summed over the lanes. The tables
// are built by one lane into `inflate_tables` (shared memory on the GPU) between syncs.
//
// The accepted streams are those libdeflate (the CPU path) accepts for a known decoded size:
// zlib header (CM 8, window <= 32 KiB, check bits, no preset dictionary), blocks up to BFINAL,
// stored / fixed / dynamic blocks with complete codes (or one code of one bit), no distance
// before the first byte, exactly the decoded size, the Adler-32 of the output; bytes after the
// Adler-32 are ignored. Where libdeflate is more lenient than RFC 1951 (up to 288 and 32 codes,
// reserved symbols decoded as the nearest real ones, a run of code lengths past the last one)
// this decoder is too, so both paths give the same bytes for every stream; the Adler-32 still
// checks the result. Reads past the input are refused, never made.
#pragma once

#include <cstdint>

#include "gpufeed/cuda/detail/codec/lz4_block.hpp"

namespace gpufeed::cuda::detail {

inline constexpr unsigned inflate_fast_bits = 9;

// One code: counts of each length and the symbols in canonical order, plus a table of the
// codes of at most inflate_fast_bits bits indexed by the stream's next bits (entry: symbol |
// length << 9; 0: longer code, decoded from counts and symbols).
struct inflate_code {
  std::uint16_t count[16];
  std::uint16_t symbol[288];  // at most 288 literal/length symbols, 32 distance symbols
  std::uint16_t fast[1u << inflate_fast_bits];
};

struct inflate_tables {
  inflate_code lit, dist;
  std::uint8_t lengths[320];  // code lengths being read (literal/length then distance)
};

// Builds `c` from `n` lengths. false: over-subscribed, or incomplete other than one code of one
// bit (libdeflate's and zlib's rule).
GPUFEED_HOST_DEVICE inline bool inflate_build(inflate_code& c, const std::uint8_t* lengths,
                                              unsigned n) {
  for (unsigned l = 0; l < 16; ++l) c.count[l] = 0;
  for (unsigned s = 0; s < n; ++s) ++c.count[lengths[s]];
  c.count[0] = 0;
  int left = 1;
  unsigned used = 0;
  for (unsigned l = 1; l < 16; ++l) {
    left <<= 1;
    left -= c.count[l];
    if (left < 0) return false;
    used += c.count[l];
  }
  if (left > 0 && !(used == 0 || (used == 1 && c.count[1] == 1))) return false;
  std::uint16_t offs[16];
  offs[1] = 0;
  for (unsigned l = 1; l < 15; ++l) offs[l + 1] = static_cast<std::uint16_t>(offs[l] + c.count[l]);
  for (unsigned s = 0; s < n; ++s)
    if (lengths[s]) c.symbol[offs[lengths[s]]++] = static_cast<std::uint16_t>(s);
  for (unsigned i = 0; i < (1u << inflate_fast_bits); ++i) c.fast[i] = 0;
  unsigned code = 0, index = 0;
  for (unsigned l = 1; l <= inflate_fast_bits; ++l) {
    for (unsigned k = 0; k < c.count[l]; ++k, ++code, ++index) {
      unsigned r = 0;  // the code's bits reversed: deflate sends codes from their top bit
      for (unsigned b = 0; b < l; ++b) r |= ((code >> b) & 1u) << (l - 1 - b);
      for (unsigned x = r; x < (1u << inflate_fast_bits); x += 1u << l)
        c.fast[x] = static_cast<std::uint16_t>(c.symbol[index] | (l << 9));
    }
    code <<= 1;
  }
  return true;
}

// The stream's bits, least significant first; never reads past `size`.
struct inflate_bits {
  const std::uint8_t* in;
  std::uint32_t size, pos = 0;
  std::uint64_t buf = 0;
  unsigned have = 0;

  GPUFEED_HOST_DEVICE void fill() {
    while (have <= 56 && pos < size) {
      buf |= std::uint64_t{in[pos++]} << have;
      have += 8;
    }
  }
  GPUFEED_HOST_DEVICE bool need(unsigned n) {
    if (have < n) fill();
    return have >= n;
  }
  GPUFEED_HOST_DEVICE std::uint32_t take(unsigned n) {  // after need(n)
    const auto v = static_cast<std::uint32_t>(buf & ((std::uint64_t{1} << n) - 1));
    buf >>= n;
    have -= n;
    return v;
  }
};

// Decodes one symbol of `c`; -1 when the bits left form no code.
GPUFEED_HOST_DEVICE inline int inflate_symbol(inflate_bits& b, const inflate_code& c) {
  b.fill();
  const std::uint16_t e = c.fast[b.buf & ((1u << inflate_fast_bits) - 1)];
  if (e != 0 && (e >> 9) <= b.have) {
    b.take(e >> 9);
    return e & 511;
  }
  int code = 0, first = 0, index = 0;  // canonical decoding, one bit at a time (puff's method)
  for (unsigned l = 1; l < 16; ++l) {
    if (!b.need(1)) return -1;
    code |= static_cast<int>(b.take(1));
    const int count = c.count[l];
    if (code - count < first) return c.symbol[index + (code - first)];
    index += count;
    first += count;
    first <<= 1;
    code <<= 1;
  }
  return -1;
}

enum class inflate_status : std::uint32_t {
  ok = 0, bad_header = 10, bad_block = 11, bad_code = 12, truncated = 13, too_long = 14,
  too_far = 15, short_output = 16, bad_checksum = 17,
};

// Inflates the zlib stream in[0, in_size) into exactly out[0, out_size).
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Group>
GPUFEED_HOST_DEVICE inflate_status inflate_zlib(const std::uint8_t* in, std::uint32_t in_size,
                                                std::uint8_t* out, std::uint32_t out_size,
                                                inflate_tables& t, Group& group) {
  // Code-length code order (RFC 1951 3.2.7); a string literal, which device code can index.
  const char* const order = "\x10\x11\x12\x00\x08\x07\x09\x06\x0a\x05\x0b\x04\x0c\x03\x0d\x02\x0e\x01\x0f";
  if (in_size < 6) return inflate_status::truncated;
  const unsigned cmf = in[0], flg = in[1];
  if ((cmf & 15) != 8 || (cmf >> 4) > 7 || (cmf * 256 + flg) % 31 != 0 || (flg & 32))
    return inflate_status::bad_header;
  inflate_bits b{in + 2, in_size - 2};
  std::uint32_t op = 0;
  bool last = false;
  while (!last) {
    if (!b.need(3)) return inflate_status::truncated;
    last = b.take(1) != 0;
    const std::uint32_t type = b.take(2);
    if (type == 0) {  // stored: byte-aligned LEN, NLEN, bytes
      b.take(b.have % 8);
      if (!b.need(32)) return inflate_status::truncated;
      const std::uint32_t len = b.take(16), nlen = b.take(16);
      if (len != (~nlen & 0xffffu)) return inflate_status::bad_block;
      if (len > out_size - op) return inflate_status::too_long;
      // Bytes still in the bit buffer come first, then straight from the input.
      std::uint32_t k = 0;
      for (; k < len && b.have >= 8; ++k) {
        const auto v = static_cast<std::uint8_t>(b.take(8));
        group.one([&] { out[op + k] = v; });
      }
      if (len - k > b.size - b.pos) return inflate_status::truncated;
      group.literals(b.in + b.pos, out + op + k, len - k);
      b.pos += len - k;
      op += len;
      continue;
    }
    if (type == 3) return inflate_status::bad_block;
    group.sync();  // every lane is done with the last block's tables
    bool built = true;
    if (type == 1) {
      group.one([&] {
        for (unsigned s = 0; s < 288; ++s)
          t.lengths[s] = static_cast<std::uint8_t>(s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8);
        inflate_build(t.lit, t.lengths, 288);
        for (unsigned s = 0; s < 32; ++s) t.lengths[s] = 5;  // 30 and 31: reserved, refused
        inflate_build(t.dist, t.lengths, 32);                 // when decoded (a complete code)
      });
    } else {
      if (!b.need(14)) return inflate_status::truncated;
      const unsigned nlen = b.take(5) + 257, ndist = b.take(5) + 1, ncode = b.take(4) + 4;
      // Up to 288 and 32 codes, as libdeflate takes them (zlib stops at 286 and 30); the
      // reserved symbols decode as libdeflate decodes them (below).
      std::uint8_t code_lengths[19] = {};
      for (unsigned i = 0; i < ncode; ++i) {
        if (!b.need(3)) return inflate_status::truncated;
        code_lengths[static_cast<unsigned char>(order[i])] = static_cast<std::uint8_t>(b.take(3));
      }
      group.one([&] { built = inflate_build(t.lit, code_lengths, 19); });
      group.sync();
      built = group.first(built);
      if (!built) return inflate_status::bad_code;
      for (unsigned i = 0; i < nlen + ndist;) {
        const int s = inflate_symbol(b, t.lit);
        if (s < 0) return inflate_status::bad_code;
        if (s < 16) {
          group.one([&] { t.lengths[i] = static_cast<std::uint8_t>(s); });
          ++i;
          continue;
        }
        unsigned repeat = 0;
        std::uint8_t value = 0;
        if (s == 16) {
          if (i == 0) return inflate_status::bad_code;
          if (!b.need(2)) return inflate_status::truncated;
          repeat = 3 + b.take(2);
          group.sync();
          value = t.lengths[i - 1];
        } else if (s == 17) {
          if (!b.need(3)) return inflate_status::truncated;
          repeat = 3 + b.take(3);
        } else {
          if (!b.need(7)) return inflate_status::truncated;
          repeat = 11 + b.take(7);
        }
        // A repeat past the last length is not an error to libdeflate (the lengths past the
        // end are dropped), so not here either.
        const unsigned kept = repeat < nlen + ndist - i ? repeat : nlen + ndist - i;
        group.one([&] {
          for (unsigned k = 0; k < kept; ++k) t.lengths[i + k] = value;
        });
        i += repeat;
      }
      group.sync();
      if (t.lengths[256] == 0) return inflate_status::bad_code;
      group.sync();  // every lane has read the code-length code and lengths[256]
      group.one([&] {
        built = inflate_build(t.lit, t.lengths, nlen) && inflate_build(t.dist, t.lengths + nlen, ndist);
      });
    }
    group.sync();
    built = group.first(built);
    if (!built) return inflate_status::bad_code;
    for (;;) {
      const int s = inflate_symbol(b, t.lit);
      if (s < 0) return inflate_status::bad_code;
      if (s < 256) {
        if (op >= out_size) return inflate_status::too_long;
        const auto v = static_cast<std::uint8_t>(s);
        group.one([&] { out[op] = v; });
        ++op;
        continue;
      }
      if (s == 256) break;
      const unsigned li = static_cast<unsigned>(s) - 257;
      // RFC 1951 3.2.5's tables as arithmetic: length codes 265-284 carry (li - 4) / 4 extra
      // bits over a base of (4 + li % 4) << extra, plus 3; distance codes 4-29 (d - 2) / 2 over
      // (2 + d % 2) << extra, plus 1. The reserved length symbols 286 and 287 are 258 and the
      // reserved distance symbols 30 and 31 are 24577 + 13 bits, as in libdeflate's tables.
      const unsigned lx = li < 8 || li >= 28 ? 0 : (li - 4) / 4;
      const std::uint32_t lbase = li < 8 ? 3 + li : li >= 28 ? 258 : ((4u + (li & 3u)) << lx) + 3;
      if (!b.need(lx)) return inflate_status::truncated;
      const std::uint32_t len = lbase + b.take(lx);
      const int d = inflate_symbol(b, t.dist);
      if (d < 0) return inflate_status::bad_code;
      const unsigned du = d < 30 ? static_cast<unsigned>(d) : 29, dx = du < 4 ? 0 : (du - 2) / 2;
      const std::uint32_t dbase = du < 4 ? du + 1 : ((2u + (du & 1u)) << dx) + 1;
      if (!b.need(dx)) return inflate_status::truncated;
      const std::uint32_t dist = dbase + b.take(dx);
      if (dist > op) return inflate_status::too_far;
      if (len > out_size - op) return inflate_status::too_long;
      group.sync();  // the bytes the match reads were written by other lanes
      group.match(out + op, dist, len);
      op += len;
    }
  }
  group.sync();
  if (op != out_size) return inflate_status::short_output;
  b.take(b.have % 8);  // the Adler-32 starts at the next byte, big-endian
  if (!b.need(32)) return inflate_status::truncated;
  std::uint32_t stored = 0;
  for (int k = 0; k < 4; ++k) stored = (stored << 8) | b.take(8);
  return group.adler(out, out_size) == stored ? inflate_status::ok : inflate_status::bad_checksum;
}

// Lane `lane`'s share of the Adler-32 of data[0, n): the sum of its bytes and of (n - i) x byte
// i, both mod 65521 (the 64-bit sums are reduced often enough never to overflow).
struct adler_part {
  std::uint32_t a = 0, w = 0;
};
GPUFEED_HOST_DEVICE inline adler_part lane_adler(const std::uint8_t* data, std::uint32_t n,
                                                 unsigned lane, unsigned lanes) {
  std::uint64_t a = 0, w = 0;
  unsigned k = 0;
  for (std::uint32_t i = lane; i < n; i += lanes, ++k) {
    a += data[i];
    w += std::uint64_t{n - i} * data[i];
    if ((k & 4095) == 4095) {
      a %= 65521;
      w %= 65521;
    }
  }
  return {static_cast<std::uint32_t>(a % 65521), static_cast<std::uint32_t>(w % 65521)};
}
// The Adler-32 from the lanes' summed parts.
GPUFEED_HOST_DEVICE inline std::uint32_t adler_from(std::uint64_t a, std::uint64_t w,
                                                    std::uint32_t n) {
  const auto lo = static_cast<std::uint32_t>((1 + a) % 65521);
  const auto hi = static_cast<std::uint32_t>((n % 65521 + w) % 65521);
  return (hi << 16) | lo;
}

// The host's stand-in for a warp running inflate_zlib (see emulated_warp).
struct emulated_inflate_warp : emulated_warp {
  template <class F>
  void one(F&& f) const {
    f();
  }
  bool first(bool v) const noexcept { return v; }
  std::uint32_t adler(const std::uint8_t* data, std::uint32_t n) const noexcept {
    std::uint64_t a = 0, w = 0;
    for (unsigned l = 0; l < width; ++l) {
      const adler_part p = lane_adler(data, n, l, width);
      a += p.a;
      w += p.w;
    }
    return adler_from(a, w, n);
  }
};

}  // namespace gpufeed::cuda::detail
