// gpufeed — the HDF5 LZ4 filter (id 32004, HDF5-External-Filter-Plugins' H5Zlz4.c). A chunk is:
//   8 bytes  big-endian total decoded size
//   4 bytes  big-endian block size B (a block larger than the total means one block)
//   blocks:  4 bytes big-endian compressed size c, then c bytes; each block decodes to
//            min(B, bytes left). A block whose c equals that size is stored raw.
// Decoded by liblz4's bounds-checked LZ4_decompress_safe.
#pragma once

#include <lz4.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>

#include "gpufeed/detail/codec/result.hpp"

namespace gpufeed::detail::codec {

// One raw LZ4 block of exactly dst.size() bytes.
inline result lz4_block(std::span<const std::byte> src, std::span<std::byte> dst) {
  constexpr std::size_t most = static_cast<std::size_t>(std::numeric_limits<int>::max());
  if (src.size() > most || dst.size() > most)
    return failed("LZ4_decompress_safe", "an LZ4 block larger than 2 GiB");
  const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(src.data()),
                                    reinterpret_cast<char*>(dst.data()),
                                    static_cast<int>(src.size()), static_cast<int>(dst.size()));
  if (n < 0) return failed("LZ4_decompress_safe", "corrupt LZ4 block");
  if (static_cast<std::size_t>(n) != dst.size())
    return failed("LZ4_decompress_safe", "an LZ4 block holds " + std::to_string(n) +
                                             " bytes, expected " + std::to_string(dst.size()));
  return {};
}

// Decodes one chunk of the LZ4 filter into exactly dst.size() bytes.
inline result lz4_filter_decode(std::span<const std::byte> src, std::span<std::byte> dst) {
  if (src.size() < 12) return failed("lz4 filter", "chunk shorter than the 12-byte LZ4 header");
  const std::uint64_t total = read_be64(src.data());
  std::uint64_t block = read_be32(src.data() + 8);
  if (total != dst.size())
    return failed("lz4 filter", "header says " + std::to_string(total) + " bytes, expected " +
                                    std::to_string(dst.size()));
  if (block > total) block = total;
  if (block == 0 && total != 0) return failed("lz4 filter", "header gives a zero block size");
  std::size_t at = 12, out = 0;
  while (out < total) {
    const std::size_t want = static_cast<std::size_t>(block < total - out ? block : total - out);
    if (src.size() - at < 4) return failed("lz4 filter", "chunk truncated before a block header");
    const std::size_t c = read_be32(src.data() + at);
    at += 4;
    if (c > src.size() - at)
      return failed("lz4 filter", "a block of " + std::to_string(c) + " bytes runs past the chunk");
    if (c == want) {
      std::memcpy(dst.data() + out, src.data() + at, want);
    } else if (const result r = lz4_block(src.subspan(at, c), dst.subspan(out, want)); !r.ok) {
      return r;
    }
    at += c;
    out += want;
  }
  return {};
}

}  // namespace gpufeed::detail::codec
