// gpufeed — how pack compresses HDF5 shards: the codec (pack_codec), its level, and their
// spelling in `gpufeed pack --compress` and the manifest ("none", "deflate[:L]", "lz4",
// "zstd[:L]", "bitshuffle-lz4"). The filter formats themselves are gpufeed's codecs'
// (detail/codec/<name>.hpp; pack/detail/codecs.hpp maps a pack_codec to its codec).
#pragma once

#include <charconv>
#include <string>
#include <string_view>
#include <system_error>

#include "gpufeed/error.hpp"

namespace gpufeed {

// The codecs pack writes: deflate (HDF5 filter 1), LZ4 (32004), Zstd (32015), Bitshuffle with
// LZ4 (32008).
enum class pack_codec { none, deflate, lz4, zstd, bitshuffle_lz4 };

// The highest level of codec c (deflate 9, zstd 22; 0 for the codecs without levels), and the
// level a compression of 0 means (deflate 4 as h5py's gzip, zstd 3 as zstd's; 0 otherwise).
constexpr int most_level(pack_codec c) noexcept {
  return c == pack_codec::deflate ? 9 : c == pack_codec::zstd ? 22 : 0;
}
constexpr int default_level(pack_codec c) noexcept {
  return c == pack_codec::deflate ? 4 : c == pack_codec::zstd ? 3 : 0;
}

// How pack compresses HDF5 shards: the codec, and its level where it has one (deflate 1-9,
// default 4 as h5py's gzip; zstd 1-22, default 3 as zstd's). LMDB shards are not compressed.
struct pack_compression {
  pack_codec codec = pack_codec::none;
  int level = 0;  // 0: the codec's default
};

// "none", "deflate[:L]", "lz4", "zstd[:L]" or "bitshuffle-lz4" (what gpufeed pack --compress
// takes); config_error naming the choices otherwise.
inline pack_compression parse_compression(std::string_view text) {
  const auto colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  pack_compression c;
  if (name == "none") c.codec = pack_codec::none;
  else if (name == "deflate" || name == "gzip") c.codec = pack_codec::deflate;
  else if (name == "lz4") c.codec = pack_codec::lz4;
  else if (name == "zstd") c.codec = pack_codec::zstd;
  else if (name == "bitshuffle-lz4") c.codec = pack_codec::bitshuffle_lz4;
  else
    throw config_error("unknown compression '" + std::string(text) +
                       "': choose none, deflate[:1-9], lz4, zstd[:1-22] or bitshuffle-lz4");
  if (colon != std::string_view::npos) {
    const std::string_view v = text.substr(colon + 1);
    const int most = most_level(c.codec);
    const auto r = std::from_chars(v.data(), v.data() + v.size(), c.level);
    if (most == 0 || v.empty() || r.ec != std::errc{} || r.ptr != v.data() + v.size() ||
        c.level < 1 || c.level > most)
      throw config_error("compression '" + std::string(text) +
                         "': a level applies to deflate (1-9) and zstd (1-22) only");
  }
  return c;
}

inline std::string to_string(const pack_compression& c) {
  const int level = c.level ? c.level : default_level(c.codec);
  switch (c.codec) {
    case pack_codec::deflate: return "deflate:" + std::to_string(level);
    case pack_codec::lz4: return "lz4";
    case pack_codec::zstd: return "zstd:" + std::to_string(level);
    case pack_codec::bitshuffle_lz4: return "bitshuffle-lz4";
    default: return "none";
  }
}

}  // namespace gpufeed
