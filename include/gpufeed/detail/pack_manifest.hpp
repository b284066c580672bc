// gpufeed::detail — what a source may learn about its shards from the manifest.json that
// `gpufeed pack` writes beside them (pack/detail/manifest.hpp writes it), before opening them:
// each shard's record count and largest record (enough to build the record space and size a
// loader's slots), its smallest record (LMDB: whether every record has one size) and its decode
// band height (HDF5: what decode_unit answers). Shared by hdf5_source and lmdb_source.
//
// Reads only that fixed shape (the library has no JSON dependency). Fields added later
// (min_record, band_rows, file_bytes, fingerprint) are optional: an older manifest still gives
// counts and largest records, and a source that needs a missing field reads the shard instead.
//
// Nothing read here is trusted: a source bounds each count and size against the shard file's
// size (check_field) before it allocates by it, and checks a shard's identity (its size and
// fingerprint, check_identity) when it first opens it, so shards swapped or replaced since pack
// are a format_error naming them, never records read in the wrong order.
#pragma once

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail {

inline constexpr const char* manifest_file_name = "manifest.json";

struct manifest_entry {
  std::uint64_t records = 0;
  std::uint64_t max_record = 0;             // bytes of the largest record
  std::optional<std::uint64_t> min_record;  // bytes of the smallest record
  // HDF5: rows per band of chunks (what records decode together), 0 when records decode alone
  // (uncompressed); absent when the shard must be opened to tell (blob layout, compressed).
  std::optional<std::uint64_t> band_rows;
  // The shard file's size in bytes (LMDB: data.mdb's) and shard_fingerprint() of it, as pack
  // wrote them; absent in older manifests (then only what is present is checked).
  std::optional<std::uint64_t> file_bytes;
  std::optional<std::uint64_t> fingerprint;
};

struct pack_manifest {
  std::filesystem::path path;
  std::string format;       // "hdf5" or "lmdb"
  bool lmdb_datum = false;  // LMDB values are Caffe Datums (options.lmdb_datum)
  std::unordered_map<std::string, manifest_entry> shards;  // by file name
  std::vector<std::string> order;  // the shards' file names, in record order
};

// The manifest whose text is t (read from p, which it records), or nullopt when t is not a
// gpufeed pack manifest.
inline std::optional<pack_manifest> parse_pack_manifest(const std::string& t,
                                                        const std::filesystem::path& p) {
  if (t.find("\"kind\": \"gpufeed pack manifest\"") == std::string::npos) return std::nullopt;
  const auto number_after = [&](std::size_t from, std::size_t end, const char* key)
      -> std::optional<std::uint64_t> {
    // Searched within [from, end) only: a key absent from one shard's entry must not cost a
    // search through the rest of the file (quadratic over 1,000 shards).
    const std::size_t k = std::string_view(t).substr(0, end).find(key, from);
    if (k == std::string::npos) return std::nullopt;
    std::size_t i = k + std::char_traits<char>::length(key);
    std::uint64_t v = 0;
    bool any = false;
    while (i < end && t[i] >= '0' && t[i] <= '9') {
      // Saturates: a number past 2^64 - 1 reads as that, which every bound refuses.
      if (__builtin_mul_overflow(v, std::uint64_t{10}, &v) ||
          __builtin_add_overflow(v, static_cast<std::uint64_t>(t[i] - '0'), &v))
        v = ~std::uint64_t{0};
      ++i;
      any = true;
    }
    return any ? std::optional<std::uint64_t>(v) : std::nullopt;
  };
  pack_manifest m;
  m.path = p;
  const std::size_t list = t.find("\"shards\": [");
  if (list == std::string::npos) return std::nullopt;
  const std::size_t list_end = t.find(']', list);
  if (const std::size_t f = t.find("\"format\": \""); f != std::string::npos && f < list)
    m.format = t.substr(f + 11, t.find('"', f + 11) - (f + 11));
  m.lmdb_datum = t.find("\"lmdb_datum\": true", list_end) != std::string::npos;
  for (std::size_t at = t.find("{\"file\": \"", list); at != std::string::npos && at < list_end;
       at = t.find("{\"file\": \"", at + 1)) {
    const std::size_t end = t.find('}', at);
    std::string name;
    std::size_t i = at + 10;
    for (; i < end && t[i] != '"'; ++i) {
      if (t[i] == '\\') return std::nullopt;  // pack's names need no escapes; be safe
      name += t[i];
    }
    manifest_entry e;
    const auto records = number_after(i, end, "\"records\": ");
    const auto max_record = number_after(i, end, "\"max_record\": ");
    if (!records || !max_record) return std::nullopt;  // an older manifest: no max_record
    e.records = *records;
    e.max_record = *max_record;
    e.min_record = number_after(i, end, "\"min_record\": ");
    e.band_rows = number_after(i, end, "\"band_rows\": ");
    e.file_bytes = number_after(i, end, "\"file_bytes\": ");
    const std::size_t fp = std::string_view(t).substr(0, end).find("\"fingerprint\": \"", i);
    if (fp != std::string::npos) {
      std::uint64_t v = 0;
      std::size_t j = fp + 16, digits = 0;
      for (; j < end && digits < 16 && std::isxdigit(static_cast<unsigned char>(t[j]));
           ++j, ++digits) {
        const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(t[j])));
        v = v << 4 | static_cast<std::uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
      }
      if (digits == 16 && j < end && t[j] == '"') e.fingerprint = v;
    }
    m.shards[name] = e;
    m.order.push_back(name);
  }
  return m;
}

// The manifest at p, or nullopt when the file is absent or is not a gpufeed pack manifest.
inline std::optional<pack_manifest> read_pack_manifest(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_pack_manifest(ss.str(), p);
}

// Bytes at each end of a shard file that its fingerprint covers.
inline constexpr std::uint64_t fingerprint_block = std::uint64_t{64} << 10;

// A cheap identity of a shard file: 64-bit FNV-1a over its size (8 bytes, little-endian), its
// first 64 KiB and its last 64 KiB (the whole file when shorter than 128 KiB). Pack records it
// in the manifest; a source compares it when it first opens the shard (two reads, no full scan:
// `gpufeed inspect --verify` checks every record's bytes against the manifest's crc32). Reads
// `shard` (its size(): the size when it was opened) through the byte-source seam. io_error naming
// it when a read fails or comes short.
inline std::uint64_t shard_fingerprint(const io::byte_source& shard) {
  const std::uint64_t size = shard.size();
  const std::string& file = shard.name();
  std::uint64_t h = 0xcbf29ce484222325ull;
  const auto mix = [&h](const unsigned char* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  };
  unsigned char sz[8];
  for (int i = 0; i < 8; ++i) sz[i] = static_cast<unsigned char>(size >> (8 * i));
  mix(sz, 8);
  std::vector<unsigned char> buf;
  const auto read_at = [&](std::uint64_t at, std::uint64_t n) {
    buf.resize(static_cast<std::size_t>(n));
    // The seam's checks; this check's own words for what they find.
    const io::read_outcome o = shard.try_read(buf.data(), buf.size(), at);
    if (o.why == io::read_outcome::stop::failed)
      throw io_error("cannot read the shard to check its identity",
                     os_call_context(file, o.api, o.err));
    if (o.why == io::read_outcome::stop::ended)
      throw io_error("the shard ended early while its identity was checked (truncated?)",
                     file_context(file));
    mix(buf.data(), buf.size());
  };
  if (size <= 2 * fingerprint_block) {
    read_at(0, size);
  } else {
    read_at(0, fingerprint_block);
    read_at(size - fingerprint_block, fingerprint_block);
  }
  return h;
}

inline std::string fingerprint_text(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// format_error naming `file` when it is not the file manifest m lists as `name` (entry e): its
// size (when the manifest has file_bytes) or its fingerprint (when it has one) differ. `shard`
// is the shard file opened for reading (its size() and name()).
inline void check_identity(const pack_manifest& m, const std::string& name,
                           const manifest_entry& e, const io::byte_source& shard) {
  const std::uint64_t size = shard.size();
  const std::string& file = shard.name();
  const std::string tail = ": shards swapped, replaced or rewritten since gpufeed pack wrote " +
                           m.path.string() + " (pack again, or remove the manifest)";
  if (e.file_bytes && *e.file_bytes != size)
    throw format_error("the shard is not the file the manifest lists as '" + name + "': it has " +
                           std::to_string(size) + " bytes, the manifest says " +
                           std::to_string(*e.file_bytes) + tail,
                       file_context(file));
  if (e.fingerprint && *e.fingerprint != shard_fingerprint(shard))
    throw format_error("the shard is not the file the manifest lists as '" + name +
                           "': its fingerprint (first and last 64 KiB) differs from the "
                           "manifest's " + fingerprint_text(*e.fingerprint) + tail,
                       file_context(file));
}

// format_error naming the manifest, the shard and the field when `value` (what the manifest
// declares) is over `limit` (what a shard file of its size can hold; `why` says how).
inline void check_field(const pack_manifest& m, const std::string& name, const char* field,
                        std::uint64_t value, std::uint64_t limit, const std::string& why) {
  if (value > limit)
    throw format_error("the manifest lists shard '" + name + "' with " + field + ": " +
                           std::to_string(value) + ", more than its file can hold (at most " +
                           std::to_string(limit) + ": " + why + "); damaged or crafted",
                       file_context(m.path.string()));
}

// Where a shard path is listed: the directory holding it and its name there. An LMDB shard
// given as its data.mdb is listed under its environment directory's name.
inline std::pair<std::filesystem::path, std::string> manifest_place(std::filesystem::path p) {
  if (p.filename().empty()) p = p.parent_path();  // "dir/shard.lmdb/"
  if (p.filename() == "data.mdb" && p.has_parent_path()) p = p.parent_path();
  return {p.parent_path(), p.filename().string()};
}

// The manifest beside the shards and each shard's entry in it (null where not listed), when
// every shard lies in that one directory; nullopt without such a manifest.
struct listed_shards {
  pack_manifest manifest;
  std::vector<const manifest_entry*> entries;  // into manifest.shards, per shard
  [[nodiscard]] bool all_listed(std::size_t from = 0) const noexcept {
    for (std::size_t k = from; k < entries.size(); ++k)
      if (!entries[k]) return false;
    return true;
  }
};
inline std::optional<listed_shards> find_listed(const std::vector<std::filesystem::path>& paths) {
  if (paths.empty()) return std::nullopt;
  const auto dir = manifest_place(paths[0]).first;
  auto m = read_pack_manifest(dir / manifest_file_name);
  if (!m) return std::nullopt;
  std::optional<listed_shards> out(std::in_place);
  out->manifest = std::move(*m);
  for (const auto& p : paths) {
    const auto [d, name] = manifest_place(p);
    const auto it = out->manifest.shards.find(name);
    out->entries.push_back(d == dir && it != out->manifest.shards.end() ? &it->second : nullptr);
  }
  return out;
}

}  // namespace gpufeed::detail
