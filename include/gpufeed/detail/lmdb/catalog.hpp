// gpufeed — the record tables of a set of LMDB shards, built by one cursor pass per shard at open.
//
// Sizes must be known before reading (the loader places every record of a batch first), so each
// shard is scanned once: keys go into one arena (+ offsets; no std::string per record), value
// sizes into one array, and for Datum values the payload's place inside the value and the label.
// At read time a record is found again by key (mdb_get) and its value must still have the size
// seen at open.
#pragma once

#include <lmdb.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/datum.hpp"
#include "gpufeed/detail/lmdb/handles.hpp"
#include "gpufeed/detail/lmdb/map_region.hpp"
#include "gpufeed/detail/lmdb/shard.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::lmdb {

// Where a Datum's payload lies in its value. payload_offset == gathered: float_data split over
// several fields, copied element by element at read.
struct datum_entry {
  std::uint64_t payload_offset = 0;
  std::uint64_t payload_size = 0;
  std::int32_t label = 0;
};
inline constexpr std::uint64_t gathered = ~std::uint64_t{0};

// A printable rendering of a key for messages: text as is, other bytes as \xNN, cut at 64 bytes.
inline std::string key_text(std::span<const std::byte> key) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < key.size() && i < 64; ++i) {
    const auto b = std::to_integer<unsigned char>(key[i]);
    if (b >= 0x20 && b < 0x7f && b != '\\' && b != '\'') {
      out += static_cast<char>(b);
    } else {
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 15];
    }
  }
  if (key.size() > 64) out += "...";
  return out;
}

class catalog {
 public:
  // Opens every shard (see shard.hpp), then scans them in order. Opening all first lets one read
  // of /proc/self/maps locate every map.
  catalog(const std::vector<std::filesystem::path>& paths, bool datum, bool immutable,
          unsigned max_readers)
      : datum_(datum), immutable_(immutable) {
    shards_.reserve(paths.size());
    for (const auto& p : paths) shards_.push_back(open_shard(p, max_readers, immutable_));
    const std::vector<mapping> maps = file_mappings();
    for (shard& s : shards_) scan(s, maps);
  }
  catalog(const catalog&) = delete;
  catalog& operator=(const catalog&) = delete;

  [[nodiscard]] std::uint64_t size() const noexcept { return value_sizes_.size(); }
  [[nodiscard]] bool datum() const noexcept { return datum_; }
  [[nodiscard]] bool immutable() const noexcept { return immutable_; }
  [[nodiscard]] const std::vector<shard>& shards() const noexcept { return shards_; }
  // First global record of shard s; shard_first(shards().size()) == size().
  [[nodiscard]] std::uint64_t shard_first(std::size_t s) const noexcept { return shard_first_[s]; }

  // Callers check i < size().
  [[nodiscard]] std::size_t shard_of(std::uint64_t i) const noexcept {
    if (shards_.size() == 1) return 0;
    const auto it = std::upper_bound(shard_first_.begin(), shard_first_.end(), i);
    return static_cast<std::size_t>(it - shard_first_.begin()) - 1;
  }
  [[nodiscard]] std::size_t record_size(std::uint64_t i) const noexcept {
    return static_cast<std::size_t>(datum_ ? datum_entries_[i].payload_size : value_sizes_[i]);
  }
  [[nodiscard]] std::uint64_t value_size(std::uint64_t i) const noexcept { return value_sizes_[i]; }
  [[nodiscard]] const datum_entry& datum_at(std::uint64_t i) const noexcept {
    return datum_entries_[i];
  }
  [[nodiscard]] std::span<const std::byte> key(std::uint64_t i) const noexcept {
    return {key_bytes_.data() + key_offsets_[i], key_offsets_[i + 1] - key_offsets_[i]};
  }

  // Context for an error about record i of shard s: its data file, the global index, and its key
  // in the message (callers append key_note()).
  [[nodiscard]] static error_context record_context(const shard& s, std::uint64_t i) {
    error_context c = file_context(s.data_file);
    c.record = i;
    return c;
  }
  [[nodiscard]] std::string key_note(std::uint64_t i) const {
    return " (key '" + key_text(key(i)) + "')";
  }

 private:
  // Appends the records of s: every key and value must lie inside the file (checked against
  // where LMDB mapped it, found in `maps`), Datum values must parse.
  void scan(shard& s, const std::vector<mapping>& maps) {
    const std::uint64_t first = value_sizes_.size();
    read_txn txn;
    if (int rc = txn.activate(s.handle.get()); rc != MDB_SUCCESS)
      throw_status(rc, "mdb_txn_begin", "cannot begin a read transaction", file_context(s.data_file));
    if (int rc = mdb_dbi_open(txn.get(), nullptr, 0, &s.dbi); rc != MDB_SUCCESS)
      throw_status(rc, "mdb_dbi_open", "cannot open the main database", file_context(s.data_file));
    unsigned flags = 0;
    if (int rc = mdb_dbi_flags(txn.get(), s.dbi, &flags); rc != MDB_SUCCESS)
      throw_status(rc, "mdb_dbi_flags", "cannot read the database flags", file_context(s.data_file));
    if (flags & MDB_DUPSORT)
      throw unsupported_error("LMDB databases with duplicate keys (MDB_DUPSORT) are not supported: "
                              "a key must name exactly one record",
                              file_context(s.data_file));
    MDB_stat st{};
    if (int rc = mdb_stat(txn.get(), s.dbi, &st); rc != MDB_SUCCESS)
      throw_status(rc, "mdb_stat", "cannot read the database statistics", file_context(s.data_file));
    if (st.ms_entries == 0)
      throw format_error("the LMDB database is empty (no records)", file_context(s.data_file));
    // A leaf node takes at least 8 bytes: more records than that is a damaged tree (this also
    // bounds the scan of a tree whose damaged branches loop).
    const std::uint64_t most = std::min<std::uint64_t>(st.ms_entries, s.file_size / 8);
    reserve(first + std::min<std::uint64_t>(most, std::uint64_t{1} << 24));

    MDB_cursor* raw = nullptr;
    if (int rc = mdb_cursor_open(txn.get(), s.dbi, &raw); rc != MDB_SUCCESS)
      throw_status(rc, "mdb_cursor_open", "cannot open a cursor", file_context(s.data_file));
    cursor cur(raw);
    MDB_val k{}, v{};
    int rc = mdb_cursor_get(raw, &k, &v, MDB_FIRST);
    for (; rc == MDB_SUCCESS; rc = mdb_cursor_get(raw, &k, &v, MDB_NEXT)) {
      const std::uint64_t rec = value_sizes_.size();
      if (rec - first == most)
        throw corrupt_error("the database holds more records than its header counts (" +
                                std::to_string(st.ms_entries) + ")",
                            record_context(s, rec));
      if (!s.valid.known()) {
        const std::byte* base = map_base_of(maps, k.mv_data, s.map_size);
        if (base) s.valid = region{base, immutable_ ? s.file_size : s.map_size};
      }
      if (!s.valid.contains(k.mv_data, k.mv_size) || !s.valid.contains(v.mv_data, v.mv_size) ||
          v.mv_size > s.file_size)
        throw corrupt_error("a key or value lies outside data.mdb (damaged LMDB page)",
                            record_context(s, rec));
      const auto* kp = static_cast<const std::byte*>(k.mv_data);
      key_bytes_.insert(key_bytes_.end(), kp, kp + k.mv_size);
      key_offsets_.push_back(key_bytes_.size());
      value_sizes_.push_back(v.mv_size);
      if (datum_) add_datum(s, rec, {static_cast<const std::byte*>(v.mv_data), v.mv_size});
    }
    if (rc != MDB_NOTFOUND)
      throw_status(rc, "mdb_cursor_get", "cannot walk the database",
                   record_context(s, value_sizes_.size()));
    if (value_sizes_.size() == first)
      throw format_error("the LMDB database is empty (no records)", file_context(s.data_file));
    if (value_sizes_.size() - first != st.ms_entries)
      throw corrupt_error("the database's header counts " + std::to_string(st.ms_entries) +
                              " records but its tree holds " +
                              std::to_string(value_sizes_.size() - first),
                          file_context(s.data_file));
    if (int crc = txn.commit(); crc != MDB_SUCCESS)
      throw_status(crc, "mdb_txn_commit", "cannot end the scan transaction",
                   file_context(s.data_file));
    shard_first_.push_back(value_sizes_.size());
  }

  void reserve(std::uint64_t n) {
    value_sizes_.reserve(n);
    key_offsets_.reserve(n + 1);
    if (datum_) datum_entries_.reserve(n);
  }

  void add_datum(const shard& s, std::uint64_t rec, std::span<const std::byte> value) {
    const datum_view d = parse_datum(value, record_context(s, rec));
    datum_entry e;
    e.label = d.label;
    e.payload_size = datum_payload_size(d);
    if (!d.data.empty())
      e.payload_offset = static_cast<std::uint64_t>(d.data.data() - value.data());
    else if (d.float_data_split())
      e.payload_offset = gathered;
    else if (!d.float_data.empty())
      e.payload_offset = static_cast<std::uint64_t>(d.float_data.data() - value.data());
    datum_entries_.push_back(e);
  }

  bool datum_, immutable_;
  std::vector<shard> shards_;
  std::vector<std::uint64_t> shard_first_{0};
  std::vector<std::byte> key_bytes_;
  std::vector<std::uint64_t> key_offsets_{0};
  std::vector<std::uint64_t> value_sizes_;
  std::vector<datum_entry> datum_entries_;
};

}  // namespace gpufeed::detail::lmdb
