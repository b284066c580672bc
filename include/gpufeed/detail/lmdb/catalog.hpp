// gpufeed — the record space of a set of LMDB shards, each shard opened and scanned on first use
// (lmdb_options::open) or all at construction.
//
// What the source knows before a shard is opened: its record count and its smallest and largest
// record, enough to build the record space, size the loader's slots and say whether every record
// has one size. They come from the manifest.json `gpufeed pack` writes beside the shards
// (detail/pack_manifest.hpp) when it lists every shard with min_record, for the same value
// format. Without one, each shard is opened and scanned at construction and closed again: a
// record's size is known only by walking the tree, so that keeps descriptors and maps bounded,
// not the time. The first shard is always opened at construction (its errors are the source's
// at once). Opening a shard (detail/lazy_slot.hpp) is thread-safe and happens once; a failed
// open throws its typed error naming the shard to every caller until an open succeeds; a shard
// that no longer has the counts and sizes known before is a format_error naming it.
//
// Descriptors are bounded (lmdb_options::max_open_shards, detail/shard_lru.hpp): an opened
// shard's table stays, its environment (descriptor and map) is closed when others need room and
// reopened by its next read (shard_reopen.hpp). With a bound, every use of a shard's environment
// holds a pin (pin(), pin_if_open()); table() alone gives the records, not an open environment.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/detail/lazy_slot.hpp"
#include "gpufeed/detail/lmdb/shard_reopen.hpp"
#include "gpufeed/detail/lmdb/shard_table.hpp"
#include "gpufeed/detail/pack_manifest.hpp"
#include "gpufeed/detail/shard_lru.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::lmdb {

// What is known of a shard before it is opened.
struct shard_extent {
  std::uint64_t records = 0;
  std::size_t min_record = 0, max_record = 0;
};

class catalog {
 public:
  // eager: every shard opened at construction (so are mutable shards: their tables must be a
  // snapshot taken when the source opens, not when a record is first used). max_open: the most
  // shards whose environments stay open (0: no bound).
  catalog(const std::vector<std::filesystem::path>& paths, bool datum, bool immutable,
          unsigned max_readers, bool eager, std::size_t max_open)
      : datum_(datum), immutable_(immutable), max_readers_(max_readers) {
    for (const auto& p : paths) {
      slots_.push_back(std::make_unique<slot>());
      slots_.back()->path = p;
    }
    live_.assign(paths.size(), nullptr);
    lru_ = std::make_unique<shard_lru>(
        paths.size(), max_open,
        [this](std::size_t k) { reopen_env(*live_[k], max_readers_, immutable_); },
        [this](std::size_t k) noexcept { close_env(*live_[k]); });
    find_manifest();
    if (eager || !immutable_ || slots_.size() == 1)
      open_all();
    else
      learn_extents();
    for (const auto& sl : slots_) {
      max_record_ = std::max(max_record_, sl->expected.max_record);
      fixed_ = fixed_ && sl->expected.min_record == sl->expected.max_record &&
               sl->expected.max_record == slots_[0]->expected.max_record;
    }
  }
  catalog(const catalog&) = delete;
  catalog& operator=(const catalog&) = delete;

  [[nodiscard]] std::uint64_t size() const noexcept { return first_.back(); }
  [[nodiscard]] bool datum() const noexcept { return datum_; }
  [[nodiscard]] bool immutable() const noexcept { return immutable_; }
  [[nodiscard]] std::size_t shard_count() const noexcept { return slots_.size(); }
  // First global record of shard k; shard_first(shard_count()) == size().
  [[nodiscard]] std::uint64_t shard_first(std::size_t k) const noexcept { return first_[k]; }
  [[nodiscard]] const std::filesystem::path& shard_path(std::size_t k) const noexcept {
    return slots_[k]->path;
  }
  // The common record size when every record has it, else 0; the largest record.
  [[nodiscard]] std::size_t fixed_record() const noexcept {
    return fixed_ ? slots_[0]->expected.max_record : 0;
  }
  [[nodiscard]] std::size_t max_record() const noexcept { return max_record_; }
  [[nodiscard]] std::size_t opens() const noexcept {
    return opens_.load(std::memory_order_relaxed);
  }

  // Whether environments are bounded: readers then pin the shard they read (pin()), one at a
  // time, and end their transaction on it before unpinning.
  [[nodiscard]] bool bounded() const noexcept { return lru_->limit() != 0; }
  // Environments open now.
  [[nodiscard]] std::size_t open_envs() const { return lru_->open_count(); }
  // Shard k (table(k) returned before) with its environment open until unpin(k); reopens it when
  // it was closed (reopen_env()'s errors).
  void pin(std::size_t k) const { lru_->pin(k); }
  // Pins shard k when its environment is open now; false when it is not (nothing pinned).
  [[nodiscard]] bool pin_if_open(std::size_t k) const noexcept {
    return if_open(k) && lru_->pin_if_open(k);
  }
  void unpin(std::size_t k) const noexcept { lru_->unpin(k); }

  // Callers check i < size().
  [[nodiscard]] std::size_t shard_of(std::uint64_t i) const noexcept {
    if (slots_.size() == 1) return 0;
    const auto it = std::upper_bound(first_.begin(), first_.end() - 1, i);
    return static_cast<std::size_t>(it - first_.begin()) - 1;
  }

  // Shard k's table, opened on first use (its open errors are thrown to every caller until an
  // open succeeds).
  [[nodiscard]] const shard_table& table(std::size_t k) const {
    const slot& sl = *slots_[k];
    return sl.table.get(
        [&] {
          auto t = lru_->open_first(
              [&] { return open_table(sl.path, first_[k], datum_, immutable_, max_readers_); });
          check_identity(sl, *t);
          check_expected(*t, sl.expected);
          live_[k] = t.get();
          lru_->adopt(k);
          return t;
        },
        opens_);
  }
  [[nodiscard]] const shard_table* if_open(std::size_t k) const noexcept {
    return slots_[k]->table.if_open();
  }

 private:
  struct slot {
    std::filesystem::path path;
    shard_extent expected;
    lazy_slot<shard_table> table;
    const manifest_entry* listed = nullptr;  // its entry in pack's manifest beside it, if any
  };

  // The manifest beside the shards (kept for identity checks at first open), when there is one.
  void find_manifest() {
    std::vector<std::filesystem::path> paths;
    for (const auto& sl : slots_) paths.push_back(sl->path);
    listed_ = find_listed(paths);
    if (listed_ && listed_->manifest.format == "lmdb")
      for (std::size_t k = 0; k < slots_.size(); ++k) slots_[k]->listed = listed_->entries[k];
  }

  // format_error naming the data file when it is not the file pack's manifest lists under the
  // shard's name (size, fingerprint): shards swapped or replaced since pack.
  void check_identity(const slot& sl, const shard_table& t) const {
    if (sl.listed)
      detail::check_identity(listed_->manifest, manifest_place(sl.path).second, *sl.listed,
                             io::fd_reader(t.s.fd, t.s.file_size, t.s.data_file));
  }

  // format_error naming the manifest and field when entry e of shard sl declares what its data
  // file cannot hold (a leaf node takes at least 8 bytes; a value lies inside the file), before
  // the record space and the loader's slots are sized by it. A file that cannot be sized fails
  // when opened; the bounds then take 64 MiB.
  void check_listed(const slot& sl, const manifest_entry& e) const {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path data = fs::is_directory(sl.path, ec) ? sl.path / "data.mdb" : sl.path;
    std::uint64_t size = fs::file_size(data, ec);
    if (ec) size = std::uint64_t{64} << 20;
    const std::string name = manifest_place(sl.path).second;
    const std::string of = "a data file of " + std::to_string(size) + " bytes";
    if (e.records == 0)
      throw format_error("the manifest lists shard '" + name + "' with records: 0; an LMDB "
                             "shard holds at least one record (damaged or edited manifest)",
                         file_context(listed_->manifest.path.string()));
    check_field(listed_->manifest, name, "records", e.records, size / 8,
                of + ", at least 8 bytes a record");
    check_field(listed_->manifest, name, "max_record", e.max_record, size, of);
    check_field(listed_->manifest, name, "min_record", *e.min_record, e.max_record,
                "its max_record");
  }

  void check_expected(const shard_table& t, const shard_extent& e) const {
    if (t.records() != e.records || t.min_record != e.min_record || t.max_record != e.max_record)
      throw format_error("the shard holds " + std::to_string(t.records()) +
                             " records (sizes " + std::to_string(t.min_record) + " to " +
                             std::to_string(t.max_record) + " bytes) but " + extents_from_ +
                             " said " + std::to_string(e.records) + " (" +
                             std::to_string(e.min_record) + " to " +
                             std::to_string(e.max_record) +
                             "): the shard changed since; rewrite the manifest or reopen",
                         file_context(t.s.data_file));
  }

  static shard_extent extent_of(const shard_table& t) {
    return shard_extent{t.records(), t.min_record, t.max_record};
  }

  // Every shard opened now. Within the bound, opening all before scanning lets one read of
  // /proc/self/maps locate every map where map_base_direct() cannot; past it, shard after shard,
  // the least recently used closed again to make room.
  void open_all() {
    extents_from_ = "opened";
    std::vector<std::unique_ptr<shard_table>> tables;
    const bool all_at_once = !bounded() || slots_.size() <= lru_->limit();
    std::vector<mapping> maps;
    if (all_at_once) {
      for (const auto& sl : slots_)
        tables.push_back(std::make_unique<shard_table>(open_shard(sl->path, max_readers_,
                                                                  immutable_), 0));
      maps = file_mappings();  // (LMDB never moves a map)
    }
    for (std::size_t k = 0; k < slots_.size(); ++k) {
      if (!all_at_once)
        tables.push_back(lru_->open_first([&] {
          return std::make_unique<shard_table>(open_shard(slots_[k]->path, max_readers_,
                                                          immutable_), 0);
        }));
      check_identity(*slots_[k], *tables[k]);
      tables[k]->first = first_.back();
      tables[k]->scan(all_at_once ? &maps : nullptr, datum_, immutable_);
      slots_[k]->expected = extent_of(*tables[k]);
      first_.push_back(first_.back() + tables[k]->records());
      live_[k] = tables[k].get();
      lru_->adopt(k);
    }
    for (std::size_t k = 0; k < slots_.size(); ++k) slots_[k]->table.set(std::move(tables[k]));
    opens_.store(slots_.size());
  }

  // The first shard opened, the others' extents from the manifest or from a scan each (closed
  // again).
  void learn_extents() {
    auto t0 = open_table(slots_[0]->path, 0, datum_, immutable_, max_readers_);
    check_identity(*slots_[0], *t0);
    slots_[0]->expected = extent_of(*t0);
    live_[0] = t0.get();
    lru_->adopt(0);
    slots_[0]->table.set(std::move(t0));
    opens_.store(1);
    const auto& listed = listed_;
    bool from_manifest = listed && listed->manifest.format == "lmdb" &&
                         listed->manifest.lmdb_datum == datum_ && listed->all_listed(1);
    for (std::size_t k = 1; from_manifest && k < slots_.size(); ++k)
      from_manifest = listed->entries[k]->min_record.has_value();
    if (from_manifest) {
      extents_from_ = "the manifest " + listed->manifest.path.string();
      for (std::size_t k = 1; k < slots_.size(); ++k) {
        const manifest_entry& e = *listed->entries[k];
        check_listed(*slots_[k], e);
        slots_[k]->expected = shard_extent{e.records, static_cast<std::size_t>(*e.min_record),
                                           static_cast<std::size_t>(e.max_record)};
      }
    } else {
      extents_from_ = "its scan at construction";
      std::uint64_t at = slots_[0]->expected.records;
      for (std::size_t k = 1; k < slots_.size(); ++k) {
        const auto t = open_table(slots_[k]->path, at, datum_, immutable_, max_readers_);
        check_identity(*slots_[k], *t);
        slots_[k]->expected = extent_of(*t);
        at += slots_[k]->expected.records;
      }
    }
    for (const auto& sl : slots_) first_.push_back(first_.back() + sl->expected.records);
  }

  bool datum_, immutable_;
  unsigned max_readers_;
  std::vector<std::unique_ptr<slot>> slots_;
  std::vector<std::uint64_t> first_{0};
  std::size_t max_record_ = 0;
  bool fixed_ = true;
  std::string extents_from_;
  std::optional<listed_shards> listed_;  // pack's manifest beside the shards, if any
  mutable std::atomic<std::size_t> opens_{0};
  // Opened shards' tables, by shard, for the LRU's callbacks: set before a shard is adopted,
  // read only under the LRU's lock.
  mutable std::vector<const shard_table*> live_;
  std::unique_ptr<shard_lru> lru_;  // bounds the shards whose environments are open
};

}  // namespace gpufeed::detail::lmdb
