// gpufeed — LMDB shards as one record space (a gpufeed::source).
//
// Records: every entry of each shard's main (unnamed) database, in key order within a shard,
// shards in the order given. A record is the raw value, or — with value_format::datum — the
// payload of a Caffe Datum (see gpufeed/datum.hpp: `data`, else the float_data bytes, unpacked
// float_data gathered element by element at read) with the Datum's label. A shard path is an
// environment directory (data.mdb + lock.mdb), its data.mdb, or a single-file (MDB_NOSUBDIR)
// environment.
//
// Opening: each shard is opened once with MDB_RDONLY | MDB_NOTLS | MDB_NORDAHEAD (+ MDB_NOLOCK
// when immutable), its main database handle opened once, and scanned once with a cursor to
// learn every key (kept in one arena per shard) and record size (Datum values are parsed there).
// When (lmdb_options::open): lazy (the default) opens the first shard at construction and every
// other one on first use of one of its records (a read, a size, a label or a key), once and
// thread-safely, so a rank reading its part of many shards opens only the shards it touches;
// their record counts and smallest and largest records come from the manifest.json
// `gpufeed pack` writes beside the shards, or without one from a scan of each at construction
// that closes it again (descriptors stay bounded, the time does not). A failed open throws its
// typed error naming the shard to every caller until an open succeeds; a shard that no longer
// has the counts and sizes the manifest stated is a format_error naming it ("the shard changed
// since"). eager, and every mutable (immutable = false) source, opens all at construction.
// Descriptors are bounded (lmdb_options::max_open_shards): past the bound the least recently
// used shard not being read closes its environment and reopens on its next read, keeping its
// record table; a reopen that finds another file, or (immutable) another size or LMDB
// transaction id, is a format_error naming the shard ("replaced or changed since it was
// opened"). Running out of descriptors is an io_error saying "too many open files".
// Before LMDB touches the map, the two meta pages are read and checked and the file must hold
// every page in use (a truncated data.mdb is refused instead of raising SIGBUS later); for
// immutable shards the B-tree's branch and leaf pages are checked too, so a damaged page is a
// corrupt_error instead of an LMDB assertion (abort). Every key and value must lie inside the
// file; a value on overflow pages must find its page's header naming that page, P_OVERFLOW and
// enough pages, and no two values may share overflow pages.
//
// Reading: the record is looked up by key (mdb_get) in a read transaction and copied once from
// the map into the caller's memory; its value must still have the size seen at open, or the read
// throws corrupt_error. A data file truncated while open (by someone else: LMDB never shrinks
// it) is an io_error naming file and record, never SIGBUS: its size is checked whenever a read
// transaction starts (once per batch for the loader's readers), and the reads from the map run
// under a SIGBUS guard (detail/io/map_fault_guard.hpp: a process-wide SIGBUS handler, installed
// on the first read, that chains to the previous one for faults that are not gpufeed's).
// Records whose pages are still in the file keep reading correctly. make_reader() gives each worker its own transactions (one per shard,
// begun on first use), reset by idle() and renewed on the next read; read() on the source itself
// is thread-safe and borrows transactions from a small internal pool.
//
// Errors (all name the data file, and the global record index where there is one):
// config_error (bad index, destination too small, no labels), io_error (missing path, OS errors),
// format_error (not an LMDB environment, empty database, value not a Datum), corrupt_error
// (truncated or damaged file, value changed since open), unsupported_error (MDB_DUPSORT
// databases), library_error (other LMDB statuses, with the API name and mdb_strerror's text).
//
// Contracts:
//  - immutable = true (the default) promises nobody writes the shards while they are open: no
//    lock file is used (MDB_NOLOCK) and each file is mapped at its size at open. With false,
//    LMDB's reader table is used (max_readers must cover every thread reading at once, plus
//    other processes), a writer may commit meanwhile (records keep the keys seen at open), and
//    the B-tree page check is skipped (the pages change under it). A writer that grows the
//    database past the map size makes reads fail with library_error (MDB_MAP_RESIZED): reopen.
//  - Never use an lmdb_source or its readers across fork(): open the shards again in the child
//    (make_reader() throws config_error in a child of the process that opened them).
//  - A reader shares ownership of the open shards: it stays valid after its source is moved or
//    destroyed. A moved-from source may only be destroyed or assigned to.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/detail/lmdb/catalog.hpp"
#include "gpufeed/detail/lmdb/read_ahead.hpp"
#include "gpufeed/detail/lmdb/reading.hpp"
#include "gpufeed/detail/lmdb/record_key.hpp"
#include "gpufeed/detail/pack_directory.hpp"
#include "gpufeed/detail/shard_paths.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/lmdb_options.hpp"

namespace gpufeed {

namespace detail::lmdb {
struct source_state {
  source_state(const std::vector<std::filesystem::path>& paths, bool datum, bool immutable,
               unsigned max_readers, record_space::open_kind open, std::size_t max_open)
      : records(paths, datum, immutable, max_readers, open, max_open), pid(::getpid()) {}
  catalog records;  // owns the envs: declared before the pool so the pool's txns end first
  txn_pool pool;
  std::once_flag infos_once;  // shards(): built once, after opening every shard (retried after
  std::vector<lmdb_shard_info> infos;  // a throw)
  pid_t pid;
};
}  // namespace detail::lmdb

class lmdb_source {
 public:
  // Shards, in record order, as users write them: one path or name, a braced list of names
  // (`lmdb_source({"train-0", "train-1"})`; const char*, std::string and path mixed), or any
  // range of path-like values (std::vector<std::string>, std::vector<path>, ...). config_error
  // when the list is empty. One `gpufeed pack` output directory (recognised by its
  // manifest.json; a shard holds data.mdb), or its manifest.json, stands for the shards its
  // manifest lists; a pack directory without a complete manifest is a format_error.
  explicit lmdb_source(const std::filesystem::path& shard_dir, lmdb_options options = {})
      : lmdb_source(std::vector<std::filesystem::path>{shard_dir}, options) {}

  explicit lmdb_source(std::initializer_list<std::filesystem::path> shard_dirs,
                       lmdb_options options = {})
      : lmdb_source(std::vector<std::filesystem::path>(shard_dirs), options) {}

  template <detail::shard_path_range R>
  explicit lmdb_source(R&& shard_dirs, lmdb_options options = {})
      : lmdb_source(detail::to_shard_paths(std::forward<R>(shard_dirs)), options) {}

  explicit lmdb_source(std::vector<std::filesystem::path> shard_dirs, lmdb_options options = {}) {
    if (shard_dirs.empty()) throw config_error("lmdb_source needs at least one shard");
    shard_dirs = detail::expand_pack_directory(std::move(shard_dirs), "lmdb");
    if (options.max_readers == 0) throw config_error("lmdb_options::max_readers must be >= 1");
    const bool datum = options.format == lmdb_options::value_format::datum;
    state_ = std::make_shared<detail::lmdb::source_state>(
        shard_dirs, datum, options.immutable, options.max_readers,
        detail::record_space::open_kind_of(options.open), options.max_open_shards);
  }

  lmdb_source(lmdb_source&&) noexcept = default;
  lmdb_source& operator=(lmdb_source&&) noexcept = default;
  lmdb_source(const lmdb_source&) = delete;
  lmdb_source& operator=(const lmdb_source&) = delete;
  ~lmdb_source() = default;

  [[nodiscard]] std::uint64_t size() const noexcept { return state_->records.size(); }

  // Opens the record's shard unless every record has one size.
  [[nodiscard]] std::size_t record_size(std::uint64_t i) const {
    detail::lmdb::check_index(state_->records, i);
    if (const std::size_t f = state_->records.fixed_record()) return f;
    return entry(i).payload_size;
  }
  // The common size when every record has it, else 0.
  [[nodiscard]] std::size_t fixed_record_size() const noexcept {
    return state_->records.fixed_record();
  }
  [[nodiscard]] std::size_t max_record_size() const noexcept {
    return state_->records.max_record();
  }

  // Thread-safe. Writes record_size(i) bytes to dst.data().
  void read(std::uint64_t i, std::span<std::byte> dst) const {
    detail::lmdb::txn_set t = state_->pool.take();
    try {
      t.read(state_->records, i, dst);
    } catch (...) {
      state_->pool.give(std::move(t), state_->records.immutable());
      throw;
    }
    state_->pool.give(std::move(t), state_->records.immutable());
  }

  [[nodiscard]] bool has_labels() const noexcept { return state_->records.datum(); }

  // The Datum's label; config_error for raw values (has_labels() is false) or a bad index.
  [[nodiscard]] std::int64_t label(std::uint64_t i) const {
    detail::lmdb::check_index(state_->records, i);
    if (!state_->records.datum()) {
      error_context c;
      c.record = i;
      throw config_error("this lmdb_source has no labels: raw values carry none (open Caffe "
                         "Datum shards with lmdb_options::format = value_format::datum)",
                         std::move(c));
    }
    return entry(i).label;
  }

  // Models read_ahead_source: madvise(MADV_WILLNEED) over the mapped pages holding the values of
  // records [first, first + count) (clipped), neighbouring pages merged; advice only. Shards not
  // opened yet are not advised (opening is I/O; their first read opens them).
  void will_need(std::uint64_t first, std::uint64_t count) const noexcept {
    if (state_) detail::lmdb::advise_records(state_->records, first, count);
  }

  // The record's LMDB key (valid as long as the source).
  [[nodiscard]] std::span<const std::byte> key(std::uint64_t i) const {
    detail::lmdb::check_index(state_->records, i);
    const auto& c = state_->records;
    const auto& t = c.table(c.shard_of(i));
    return t.key(i - t.first);
  }

  // Models record_naming_source: record i's input name, from its key — what follows
  // "<digits>_" (`gpufeed pack` writes "0000000042_train/cat/0042.jpg", Caffe's
  // convert_imageset 8 digits; detail/lmdb/record_key.hpp); nullopt for a key without one
  // (digits alone: no name, or one too long for a key). The keys are in memory once the shard
  // is open; a shard not opened yet is opened. config_error when i is out of range.
  [[nodiscard]] std::optional<std::string> name_of(std::uint64_t i) const {
    return detail::lmdb::name_in_key(key(i));
  }

  // Per-thread read transactions (one per shard, begun lazily; with max_open_shards, one at a
  // time: the shard being read stays pinned open until the reader moves to another or idles).
  // Not thread-safe itself: one thread at a time. idle() releases the snapshots (mdb_txn_reset)
  // and the pin between batches.
  class reader {
   public:
    reader(reader&&) noexcept = default;
    reader& operator=(reader&&) noexcept = default;
    reader(const reader&) = delete;
    reader& operator=(const reader&) = delete;
    ~reader() = default;

    void read(std::uint64_t i, std::span<std::byte> dst) { txns_.read(state_->records, i, dst); }
    void idle() noexcept { txns_.idle(); }

   private:
    friend class lmdb_source;
    explicit reader(std::shared_ptr<const detail::lmdb::source_state> state) noexcept
        : state_(std::move(state)) {}
    std::shared_ptr<const detail::lmdb::source_state> state_;  // declared first: outlives txns_
    detail::lmdb::txn_set txns_;
  };

  [[nodiscard]] reader make_reader() const {
    if (::getpid() != state_->pid)
      throw config_error("an lmdb_source cannot be used across fork(): open the shards again in "
                         "the child process");
    return reader(state_);
  }

  // Every shard, in record order. Opens any shard not opened yet (so it may throw that shard's
  // open error): describing a shard takes its scan. shard_info(k) does not open.
  [[nodiscard]] const std::vector<lmdb_shard_info>& shards() const {
    auto& st = *state_;
    std::call_once(st.infos_once, [&] {
      std::vector<lmdb_shard_info> v;
      for (std::size_t k = 0; k < st.records.shard_count(); ++k) {
        (void)st.records.table(k);
        v.push_back(shard_info(k));
      }
      st.infos = std::move(v);
    });
    return st.infos;
  }

  // Shard k as known now: described in full when opened, else (opened == false) only its path,
  // place and record count. config_error when k is out of range.
  [[nodiscard]] lmdb_shard_info shard_info(std::size_t k) const {
    const auto& c = state_->records;
    if (k >= c.shard_count())
      throw config_error("shard " + std::to_string(k) + " is out of range (the source has " +
                         std::to_string(c.shard_count()) + " shards)");
    lmdb_shard_info info;
    info.path = c.shard_path(k);
    info.first_record = c.shard_first(k);
    info.records = c.shard_first(k + 1) - info.first_record;
    info.format = c.datum() ? "datum" : "raw";
    const auto* t = c.if_open(k);
    info.opened = t != nullptr;
    if (t) {
      info.data_bytes = t->data_bytes;
      info.min_record = t->min_record;
      info.max_record = t->max_record;
    }
    return info;
  }

  // Models file_naming_source: the shard holding record i, as given, without opening it.
  // config_error when i is out of range.
  [[nodiscard]] const std::filesystem::path& file_of(std::uint64_t i) const {
    detail::lmdb::check_index(state_->records, i);
    return state_->records.file_of(i);
  }

  // Shards opened so far (1 after construction with lazy opening, every one with eager).
  [[nodiscard]] std::size_t shards_opened() const noexcept {
    return state_ ? state_->records.opens() : 0;
  }

 private:
  const detail::lmdb::record_entry& entry(std::uint64_t i) const {
    const auto& c = state_->records;
    const auto& t = c.table(c.shard_of(i));
    return t.entry(i - t.first);
  }

  std::shared_ptr<detail::lmdb::source_state> state_;  // shared with readers; never copied
};

}  // namespace gpufeed
