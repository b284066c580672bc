// gpufeed::detail::lmdb — the keys `gpufeed pack` gives LMDB records, and the input name a
// source reads back from a key.
//
// Caffe's convention (convert_imageset): the record number, zero-padded, an underscore and the
// input's name — "0000000042_train/cat/0042.jpg". pack pads to 10 digits, so byte order of the
// keys (LMDB's order, the source's record order) is record order whatever the names. A key
// longer than LMDB's limit (511 bytes, mdb_env_get_maxkeysize) keeps the digits only, as does a
// record without a name.
#pragma once

#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gpufeed::detail::lmdb {

// LMDB's largest key with its default build (MDB_MAXKEYSIZE).
inline constexpr std::size_t max_key_bytes = 511;

// Record `global`'s key: "%010u_<name>", or the 10 digits alone when `name` is empty or the key
// would exceed max_key_bytes.
inline std::string record_key(std::uint64_t global, std::string_view name) {
  char digits[24];
  const int n = std::snprintf(digits, sizeof digits, "%010" PRIu64, global);
  std::string key(digits, static_cast<std::size_t>(n));
  if (!name.empty() && key.size() + 1 + name.size() <= max_key_bytes) {
    key += '_';
    key += name;
  }
  return key;
}

// The input name a key carries: what follows "<digits>_" (one digit or more, so Caffe's 8-digit
// keys qualify too); nullopt for any other key (digits alone, or a key of another convention).
inline std::optional<std::string> name_in_key(std::span<const std::byte> key) {
  const auto* p = reinterpret_cast<const char*>(key.data());
  std::size_t d = 0;
  while (d < key.size() && p[d] >= '0' && p[d] <= '9') ++d;
  if (d == 0 || d + 1 >= key.size() || p[d] != '_') return std::nullopt;
  return std::string(p + d + 1, key.size() - d - 1);
}

}  // namespace gpufeed::detail::lmdb
