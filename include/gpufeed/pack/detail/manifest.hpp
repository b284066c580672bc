// gpufeed — pack(): the manifest text (part of gpufeed/pack/pack.hpp). Hand-written JSON: the
// library has no JSON dependency, and the manifest is small and flat.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpufeed/detail/json_writer.hpp"
#include "gpufeed/detail/pack_manifest.hpp"  // fingerprint_text

namespace gpufeed::detail::pack {

// JSON string literals: the library's one writer (detail/json_writer.hpp).
using gpufeed::detail::json_string;

struct manifest_shard {
  std::string file;
  std::uint64_t records = 0, bytes = 0, first_record = 0;
  std::uint32_t crc32 = 0;
  std::uint64_t max_record = 0;  // bytes of the largest record
  std::uint64_t min_record = 0;  // bytes of the smallest record
  // HDF5: rows per band of chunks decoded together (0: records decode alone); unset when only
  // the opened shard can tell (compressed blob layout) and for LMDB.
  std::optional<std::uint64_t> band_rows;
  // The shard file's size (LMDB: data.mdb's) and detail::shard_fingerprint() of it: what a
  // source checks a shard's identity by when it first opens it. Unset: not written.
  std::optional<std::uint64_t> file_bytes, fingerprint;
};

struct manifest_data {
  std::string format, version, prefix;
  std::uint64_t records = 0, bytes = 0, shard_bytes = 0, chunk_bytes = 0;
  int deflate_level = 0;
  std::string compression = "none";  // to_string(pack_compression)
  bool labels = false, datum = false;
  bool shuffled = false;
  std::uint64_t seed = 0;
  const std::vector<std::string>* names = nullptr;  // record index -> input name, or none
  std::string source;                               // a JSON object's text, or empty
  std::vector<std::string> label_names;
  std::vector<manifest_shard> shards;
};

inline std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(v));
  return buf;
}

// Starts with manifest_marker (output.hpp). Nothing in it depends on time or thread count.
inline std::string manifest_text(const manifest_data& m) {
  const auto num = [](std::uint64_t v) { return std::to_string(v); };
  std::string t = "{\n  \"kind\": \"gpufeed pack manifest\",\n";
  t += "  \"gpufeed_version\": " + json_string(m.version) + ",\n";
  t += "  \"format\": " + json_string(m.format) + ",\n";
  t += "  \"records\": " + num(m.records) + ",\n";
  t += "  \"bytes\": " + num(m.bytes) + ",\n";
  t += "  \"crc32_of\": \"zlib crc32 of a shard's record bytes, records in order\",\n";
  t += "  \"shards\": [";
  for (std::size_t i = 0; i < m.shards.size(); ++i) {
    const manifest_shard& s = m.shards[i];
    t += (i ? ",\n    {" : "\n    {");
    t += "\"file\": " + json_string(s.file) + ", \"records\": " + num(s.records) +
         ", \"bytes\": " + num(s.bytes) + ", \"first_record\": " + num(s.first_record) +
         ", \"max_record\": " + num(s.max_record) + ", \"min_record\": " + num(s.min_record) +
         (s.band_rows ? ", \"band_rows\": " + num(*s.band_rows) : std::string()) +
         (s.file_bytes ? ", \"file_bytes\": " + num(*s.file_bytes) : std::string()) +
         (s.fingerprint ? ", \"fingerprint\": \"" + fingerprint_text(*s.fingerprint) + "\""
                        : std::string()) +
         ", \"crc32\": \"" + hex32(s.crc32) + "\"}";
  }
  t += m.shards.empty() ? "],\n" : "\n  ],\n";
  t += "  \"has_labels\": " + std::string(m.labels ? "true" : "false") + ",\n";
  t += "  \"labels\": {";
  for (std::size_t i = 0; i < m.label_names.size(); ++i)
    t += (i ? ", " : "") + json_string(m.label_names[i]) + ": " + num(i);
  t += "},\n";
  t += "  \"options\": {\"shard_bytes\": " + num(m.shard_bytes) +
       ", \"deflate_level\": " + std::to_string(m.deflate_level) +
       ", \"chunk_bytes\": " + num(m.chunk_bytes) + ", \"prefix\": " + json_string(m.prefix) +
       ", \"lmdb_datum\": " + (m.datum ? "true" : "false") +
       ", \"compression\": " + json_string(m.compression) + "},\n";
  // The order: record i of the pack (global index) holds names[i]; with "shuffled", inputs were
  // permuted by the seed (pack/detail/plan.hpp's shuffled_order), else kept in listing order.
  t += "  \"order\": {\"shuffled\": " + std::string(m.shuffled ? "true" : "false") +
       ", \"seed\": " + num(m.seed) + "},\n";
  if (!m.source.empty()) t += "  \"source\": " + m.source + ",\n";
  t += "  \"names\": [";
  if (m.names)
    for (std::size_t i = 0; i < m.names->size(); ++i)
      t += (i % 8 ? ", " : (i ? ",\n    " : "\n    ")) + json_string((*m.names)[i]);
  t += (m.names && !m.names->empty()) ? "\n  ]\n" : "]\n";
  return t + "}\n";
}

}  // namespace gpufeed::detail::pack
