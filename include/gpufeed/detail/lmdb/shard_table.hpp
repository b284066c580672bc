// gpufeed — one LMDB shard's record table, built by one cursor pass when the shard is opened.
//
// Sizes must be known before reading (the loader places every record of a batch first), so each
// shard is scanned once into one 32-byte entry per record: the value size, where the delivered
// bytes lie in the value (a Datum's payload), the label, and the key — inline when it has at most
// 14 bytes ("%08d" keys), else as an offset into the shard's key arena (no std::string per
// record). One entry is all a read touches besides LMDB's pages: each further array would cost a
// cache and TLB miss per random read. At read time a record is found again by key (mdb_get) and
// its value must still have the size seen at open. catalog.hpp holds the tables of a source's
// shards, each opened on first use.
#pragma once

#include <lmdb.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/datum.hpp"
#include "gpufeed/detail/lmdb/handles.hpp"
#include "gpufeed/detail/lmdb/map_region.hpp"
#include "gpufeed/detail/lmdb/shard.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::lmdb {

// What the catalog knows about one record. LMDB stores value sizes in 32 bits (MAXDATASIZE), so
// 32-bit sizes and offsets cover every value.
struct record_entry {
  static constexpr std::size_t inline_key = 14;
  std::uint32_t value_size = 0;      // the LMDB value's size at open (checked at read)
  std::uint32_t payload_offset = 0;  // delivered bytes start here in the value; gathered: see below
  std::uint32_t payload_size = 0;    // delivered bytes (record_size)
  std::int32_t label = 0;            // Datum label (0 for raw values)
  std::uint16_t key_size = 0;
  std::byte key[inline_key] = {};    // the key if key_size <= inline_key, else its arena offset
};
static_assert(sizeof(record_entry) == 32);
// payload_offset of a Datum whose float_data is split over several fields: gathered at read.
inline constexpr std::uint32_t gathered = ~std::uint32_t{0};

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

// Context for an error about global record i of shard s: its data file and the index (callers
// append the key: shard_table::key_note()).
[[nodiscard]] inline error_context record_context(const shard& s, std::uint64_t i) {
  error_context c = file_context(s.data_file);
  c.record = i;
  return c;
}

// One opened shard: its environment and the table of its records (local index r holds global
// record first + r). The table is immutable after open_table() returns it; the environment (s)
// is closed and reopened by the catalog's shard_lru (shard_reopen.hpp) while no reader pins it.
class shard_table {
 public:
  // Where a value starts in the data file (read-ahead advice only), or no_offset where the
  // map's place was not found.
  static constexpr std::uint64_t no_offset = ~std::uint64_t{0};

  mutable shard s;  // changed only by close_env() / reopen_env(), under the LRU's lock
  std::uint64_t first = 0;  // global index of its first record
  std::size_t min_record = 0, max_record = 0;  // delivered sizes
  std::uint64_t data_bytes = 0;                // sum of delivered sizes

  shard_table(shard opened, std::uint64_t first_record) : s(std::move(opened)), first(first_record) {}
  shard_table(const shard_table&) = delete;
  shard_table& operator=(const shard_table&) = delete;

  [[nodiscard]] std::uint64_t records() const noexcept { return entries_.size(); }
  [[nodiscard]] const record_entry& entry(std::uint64_t r) const noexcept { return entries_[r]; }
  [[nodiscard]] std::uint64_t value_offset(std::uint64_t r) const noexcept { return value_at_[r]; }
  [[nodiscard]] std::span<const std::byte> key(const record_entry& e) const noexcept {
    if (e.key_size <= record_entry::inline_key) return {e.key, e.key_size};
    std::uint64_t at = 0;
    std::memcpy(&at, e.key, sizeof at);
    return {key_arena_.data() + at, e.key_size};
  }
  [[nodiscard]] std::span<const std::byte> key(std::uint64_t r) const noexcept {
    return key(entries_[r]);
  }
  [[nodiscard]] std::string key_note(std::uint64_t r) const {
    return " (key '" + key_text(key(r)) + "')";
  }

  // Reads every record of the open shard: every key and value must lie inside the file (checked
  // against where LMDB mapped it: map_base_direct(), else found in `maps`, read now when null),
  // Datum values must parse. Errors name the
  // data file and the global record.
  void scan(const std::vector<mapping>* maps, bool datum, bool immutable) {
    datum_ = datum;
    immutable_ = immutable;
    scan_records(maps);
    min_record = entries_.empty() ? 0 : entries_[0].payload_size;
    for (const record_entry& e : entries_) {
      min_record = std::min<std::size_t>(min_record, e.payload_size);
      max_record = std::max<std::size_t>(max_record, e.payload_size);
      data_bytes += e.payload_size;
    }
  }

 private:
  void scan_records(const std::vector<mapping>* maps) {
    std::vector<mapping> read_here;
    const std::uint64_t first_rec = first;
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
    entries_.reserve(std::min<std::uint64_t>(most, std::uint64_t{1} << 24));

    MDB_cursor* raw = nullptr;
    if (int rc = mdb_cursor_open(txn.get(), s.dbi, &raw); rc != MDB_SUCCESS)
      throw_status(rc, "mdb_cursor_open", "cannot open a cursor", file_context(s.data_file));
    cursor cur(raw);
    MDB_val k{}, v{};
    std::vector<overflow_run> runs;  // values on overflow pages: no two may share a page
    int rc = mdb_cursor_get(raw, &k, &v, MDB_FIRST);
    for (; rc == MDB_SUCCESS; rc = mdb_cursor_get(raw, &k, &v, MDB_NEXT)) {
      const std::uint64_t rec = first_rec + entries_.size();
      if (entries_.size() == most)
        throw corrupt_error("the database's tree holds more records than its header counts (" +
                                std::to_string(st.ms_entries) + ") or the file can hold",
                            record_context(s, rec));
      if (!s.valid.known()) {
        const std::byte* base = map_base_direct(k.mv_data, s.psize, s.map_size, s.fd);
        if (!base && !maps) {
          read_here = file_mappings();
          maps = &read_here;
        }
        if (!base) base = map_base_of(*maps, k.mv_data, s.map_size);
        if (base) s.valid = region{base, immutable_ ? s.file_size : s.map_size};
      }
      if (!s.valid.contains(k.mv_data, k.mv_size) || !s.valid.contains(v.mv_data, v.mv_size) ||
          v.mv_size > s.file_size || v.mv_size > 0xffffffffu || k.mv_size > 0xffffu)
        throw corrupt_error("a key or value lies outside data.mdb (damaged LMDB page)",
                            record_context(s, rec));
      if (const char* why = check_overflow_value(s, v))
        throw corrupt_error(std::string("damaged LMDB overflow page: ") + why,
                            record_context(s, rec));
      const std::uintptr_t vat = reinterpret_cast<std::uintptr_t>(v.mv_data) -
                                reinterpret_cast<std::uintptr_t>(s.valid.base);
      if (s.valid.known() && s.psize && vat % s.psize == page_layout::header)
        runs.push_back({vat / s.psize, (page_layout::header + v.mv_size + s.psize - 1) / s.psize,
                        rec});
      record_entry e;
      e.value_size = static_cast<std::uint32_t>(v.mv_size);
      e.payload_size = e.value_size;
      e.key_size = static_cast<std::uint16_t>(k.mv_size);
      const auto* kp = static_cast<const std::byte*>(k.mv_data);
      if (k.mv_size <= record_entry::inline_key) {
        if (k.mv_size) std::memcpy(e.key, kp, k.mv_size);
      } else {
        const std::uint64_t at = key_arena_.size();
        std::memcpy(e.key, &at, sizeof at);
        key_arena_.insert(key_arena_.end(), kp, kp + k.mv_size);
      }
      if (datum_) set_datum(e, s, rec, {static_cast<const std::byte*>(v.mv_data), v.mv_size});
      entries_.push_back(e);
      value_at_.push_back(s.valid.known() ? vat : no_offset);
    }
    if (rc != MDB_NOTFOUND)
      throw_status(rc, "mdb_cursor_get", "cannot walk the database",
                   record_context(s, first_rec + entries_.size()));
    if (entries_.empty())
      throw format_error("the LMDB database is empty (no records)", file_context(s.data_file));
    if (entries_.size() != st.ms_entries)
      throw corrupt_error("the database's header counts " + std::to_string(st.ms_entries) +
                              " records but its tree holds " +
                              std::to_string(entries_.size()),
                          file_context(s.data_file));
    check_runs(s, runs);
    if (int crc = txn.commit(); crc != MDB_SUCCESS)
      throw_status(crc, "mdb_txn_commit", "cannot end the scan transaction",
                   file_context(s.data_file));
  }

  // The overflow pages of one value: [first, first + pages), and its record.
  struct overflow_run {
    std::uint64_t first = 0, pages = 0, record = 0;
  };
  // Two values on the same overflow pages: a damaged overflow page number points into another
  // value (whose own header checks pass), so one of them would deliver the other's bytes.
  static void check_runs(const shard& sh, std::vector<overflow_run>& runs) {
    std::sort(runs.begin(), runs.end(),
              [](const overflow_run& a, const overflow_run& b) { return a.first < b.first; });
    for (std::size_t i = 1; i < runs.size(); ++i)
      if (runs[i].first < runs[i - 1].first + runs[i - 1].pages)
        throw corrupt_error("damaged LMDB overflow page: the value's overflow pages (from page " +
                                std::to_string(runs[i].first) + ") overlap those of record " +
                                std::to_string(std::min(runs[i].record, runs[i - 1].record)),
                            record_context(sh, std::max(runs[i].record, runs[i - 1].record)));
  }

  static void set_datum(record_entry& e, const shard& sh, std::uint64_t rec,
                        std::span<const std::byte> value) {
    const datum_view d = parse_datum(value, record_context(sh, rec));
    e.label = d.label;
    e.payload_size = static_cast<std::uint32_t>(datum_payload_size(d));  // <= value size
    e.payload_offset = 0;
    if (!d.data.empty())
      e.payload_offset = static_cast<std::uint32_t>(d.data.data() - value.data());
    else if (d.float_data_split())
      e.payload_offset = gathered;
    else if (!d.float_data.empty())
      e.payload_offset = static_cast<std::uint32_t>(d.float_data.data() - value.data());
  }

  bool datum_ = false, immutable_ = true;
  std::vector<record_entry> entries_;  // key order; never resized after the scan
  std::vector<std::byte> key_arena_;   // keys longer than record_entry::inline_key
  std::vector<std::uint64_t> value_at_;  // per record: value_offset(); not on the read path
};

// Opens and scans the shard at `path`, whose first record is global record `first`.
inline std::unique_ptr<shard_table> open_table(const std::filesystem::path& path,
                                               std::uint64_t first, bool datum, bool immutable,
                                               unsigned max_readers) {
  auto t = std::make_unique<shard_table>(open_shard(path, max_readers, immutable), first);
  t->scan(nullptr, datum, immutable);
  return t;
}

}  // namespace gpufeed::detail::lmdb
