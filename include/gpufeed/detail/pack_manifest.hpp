// gpufeed::detail — what a source may learn about its shards from the manifest.json that
// `gpufeed pack` writes beside them (pack/detail/manifest.hpp writes it), before opening them:
// each shard's record count and largest record (enough to build the record space and size a
// loader's slots), its smallest record (LMDB: whether every record has one size) and its decode
// band height (HDF5: what decode_unit answers). Shared by hdf5_source and lmdb_source.
//
// Reads only that fixed shape (the library has no JSON dependency). Fields added later
// (min_record, band_rows) are optional: an older manifest still gives counts and largest
// records, and a source that needs a missing field reads the shard instead.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpufeed::detail {

inline constexpr const char* manifest_file_name = "manifest.json";

struct manifest_entry {
  std::uint64_t records = 0;
  std::uint64_t max_record = 0;             // bytes of the largest record
  std::optional<std::uint64_t> min_record;  // bytes of the smallest record
  // HDF5: rows per band of chunks (what records decode together), 0 when records decode alone
  // (uncompressed); absent when the shard must be opened to tell (blob layout, compressed).
  std::optional<std::uint64_t> band_rows;
};

struct pack_manifest {
  std::filesystem::path path;
  std::string format;       // "hdf5" or "lmdb"
  bool lmdb_datum = false;  // LMDB values are Caffe Datums (options.lmdb_datum)
  std::unordered_map<std::string, manifest_entry> shards;  // by file name
  std::vector<std::string> order;  // the shards' file names, in record order
};

// The manifest at p, or nullopt when the file is absent or is not a gpufeed pack manifest.
inline std::optional<pack_manifest> read_pack_manifest(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string t = ss.str();
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
      v = v * 10 + static_cast<std::uint64_t>(t[i++] - '0');
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
    m.shards[name] = e;
    m.order.push_back(name);
  }
  return m;
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
