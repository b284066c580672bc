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
// at once). Opening a shard (detail/record_space/lazy_slot.hpp) is thread-safe and happens once;
// a failed open throws its typed error naming the shard to every caller until an open succeeds;
// a shard that no longer has the counts and sizes known before is a format_error naming it. The
// record space itself (numbering, lazy open, manifest entries, descriptor bound) is the
// format-free detail/record_space/shard_space.hpp; what is here is LMDB's.
//
// Descriptors are bounded (lmdb_options::max_open_shards, detail/shard_lru.hpp): an opened
// shard's table stays, its environment (descriptor and map) is closed when others need room and
// reopened by its next read (shard_reopen.hpp). With a bound, every use of a shard's environment
// holds a pin (pin(), pin_if_open()); table() alone gives the records, not an open environment.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/detail/lmdb/shard_reopen.hpp"
#include "gpufeed/detail/lmdb/shard_table.hpp"
#include "gpufeed/detail/pack_manifest.hpp"
#include "gpufeed/detail/record_space/open_kind.hpp"
#include "gpufeed/detail/record_space/shard_space.hpp"
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
  // open eager: every shard opened at construction (so are mutable shards: their tables must be
  // a snapshot taken when the source opens, not when a record is first used). max_open: the most
  // shards whose environments stay open (0: no bound).
  catalog(const std::vector<std::filesystem::path>& paths, bool datum, bool immutable,
          unsigned max_readers, record_space::open_kind open, std::size_t max_open)
      : datum_(datum),
        immutable_(immutable),
        max_readers_(max_readers),
        space_(paths, max_open,
               [this](const shard_table& t) { reopen_env(t, max_readers_, immutable_); },
               [](const shard_table& t) noexcept { close_env(t); }) {
    space_.find_manifest([](const pack_manifest& m) { return m.format == "lmdb"; });
    if (open == record_space::open_kind::eager || !immutable_ || shard_count() == 1)
      open_all();
    else
      learn_extents();
    for (std::size_t k = 0; k < shard_count(); ++k) {
      const shard_extent& e = space_.at(k).expected;
      max_record_ = std::max(max_record_, e.max_record);
      fixed_ = fixed_ && e.min_record == e.max_record &&
               e.max_record == space_.at(0).expected.max_record;
    }
  }
  catalog(const catalog&) = delete;
  catalog& operator=(const catalog&) = delete;

  [[nodiscard]] std::uint64_t size() const noexcept { return space_.size(); }
  [[nodiscard]] bool datum() const noexcept { return datum_; }
  [[nodiscard]] bool immutable() const noexcept { return immutable_; }
  [[nodiscard]] std::size_t shard_count() const noexcept { return space_.shard_count(); }
  // First global record of shard k; shard_first(shard_count()) == size().
  [[nodiscard]] std::uint64_t shard_first(std::size_t k) const noexcept { return space_.first(k); }
  [[nodiscard]] const std::filesystem::path& shard_path(std::size_t k) const noexcept {
    return space_.path(k);
  }
  // The shard path holding record i (callers check i < size()), without opening it.
  [[nodiscard]] const std::filesystem::path& file_of(std::uint64_t i) const noexcept {
    return space_.file_of(i);
  }
  // The common record size when every record has it, else 0; the largest record.
  [[nodiscard]] std::size_t fixed_record() const noexcept {
    return fixed_ ? space_.at(0).expected.max_record : 0;
  }
  [[nodiscard]] std::size_t max_record() const noexcept { return max_record_; }
  [[nodiscard]] std::size_t opens() const noexcept { return space_.opens(); }

  // Whether environments are bounded: readers then pin the shard they read (pin()), one at a
  // time, and end their transaction on it before unpinning.
  [[nodiscard]] bool bounded() const noexcept { return space_.lru().limit() != 0; }
  // Environments open now.
  [[nodiscard]] std::size_t open_envs() const { return space_.lru().open_count(); }
  // Shard k (table(k) returned before) with its environment open until unpin(k); reopens it when
  // it was closed (reopen_env()'s errors).
  void pin(std::size_t k) const { space_.lru().pin(k); }
  // Pins shard k when its environment is open now; false when it is not (nothing pinned).
  [[nodiscard]] bool pin_if_open(std::size_t k) const noexcept {
    return if_open(k) && space_.lru().pin_if_open(k);
  }
  void unpin(std::size_t k) const noexcept { space_.lru().unpin(k); }

  // Callers check i < size().
  [[nodiscard]] std::size_t shard_of(std::uint64_t i) const noexcept {
    return space_.locate(i).shard;
  }
  // fn(k, lo, hi) for the local records [lo, hi) of each shard k that [first, first + count)
  // spans (record_space::shard_offsets::for_each_shard_part).
  template <class Fn>
  void for_each_shard_part(std::uint64_t first, std::uint64_t count, Fn&& fn) const {
    space_.for_each_shard_part(first, count, std::forward<Fn>(fn));
  }

  // Shard k's table, opened on first use (its open errors are thrown to every caller until an
  // open succeeds).
  [[nodiscard]] const shard_table& table(std::size_t k) const {
    const shard_slot& sl = space_.at(k);
    return space_.open(
        k,
        [&] { return open_table(sl.path, space_.first(k), datum_, immutable_, max_readers_); },
        [&](const shard_table& t) {
          check_identity(sl, t);
          check_expected(t, sl.expected);
        });
  }
  [[nodiscard]] const shard_table* if_open(std::size_t k) const noexcept {
    return space_.if_open(k);
  }

 private:
  using shard_space = record_space::shard_space<shard_table, shard_extent>;
  using shard_slot = shard_space::slot;

  // format_error naming the data file when it is not the file pack's manifest lists under the
  // shard's name (size, fingerprint): shards swapped or replaced since pack.
  void check_identity(const shard_slot& sl, const shard_table& t) const {
    if (sl.listed)
      detail::check_identity(space_.listed()->manifest, manifest_place(sl.path).second,
                             *sl.listed, io::fd_reader(t.s.fd, t.s.file_size, t.s.data_file));
  }

  // format_error naming the manifest and field when entry e of shard sl declares what its data
  // file cannot hold (a leaf node takes at least 8 bytes; a value lies inside the file), before
  // the record space and the loader's slots are sized by it. A file that cannot be sized fails
  // when opened; the bounds then take 64 MiB.
  void check_listed(const shard_slot& sl, const manifest_entry& e) const {
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
                         file_context(space_.listed()->manifest.path.string()));
    check_field(space_.listed()->manifest, name, "records", e.records, size / 8,
                of + ", at least 8 bytes a record");
    check_field(space_.listed()->manifest, name, "max_record", e.max_record, size, of);
    check_field(space_.listed()->manifest, name, "min_record", *e.min_record, e.max_record,
                "its max_record");
  }

  void check_expected(const shard_table& t, const shard_extent& e) const {
    if (t.records() != e.records || t.min_record != e.min_record || t.max_record != e.max_record)
      throw format_error("the shard holds " + std::to_string(t.records()) +
                             " records (sizes " + std::to_string(t.min_record) + " to " +
                             std::to_string(t.max_record) + " bytes) but " + space_.extents_from() +
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
    space_.set_extents_from("opened");
    std::vector<std::unique_ptr<shard_table>> tables;
    const bool all_at_once = !bounded() || shard_count() <= space_.lru().limit();
    std::vector<mapping> maps;
    if (all_at_once) {
      for (std::size_t k = 0; k < shard_count(); ++k)
        tables.push_back(std::make_unique<shard_table>(
            open_shard(space_.path(k), max_readers_, immutable_), 0));
      maps = file_mappings();  // (LMDB never moves a map)
    }
    std::uint64_t at = 0;
    for (std::size_t k = 0; k < shard_count(); ++k) {
      if (!all_at_once)
        tables.push_back(space_.lru().open_first([&] {
          return std::make_unique<shard_table>(open_shard(space_.path(k), max_readers_,
                                                          immutable_), 0);
        }));
      check_identity(space_.at(k), *tables[k]);
      tables[k]->first = at;
      tables[k]->scan(all_at_once ? &maps : nullptr, datum_, immutable_);
      space_.at(k).expected = extent_of(*tables[k]);
      at += tables[k]->records();
      space_.adopt(k, *tables[k]);
    }
    space_.number_records();
    for (std::size_t k = 0; k < shard_count(); ++k) space_.publish(k, std::move(tables[k]));
  }

  // The first shard opened, the others' extents from the manifest or from a scan each (closed
  // again).
  void learn_extents() {
    auto t0 = open_table(space_.path(0), 0, datum_, immutable_, max_readers_);
    check_identity(space_.at(0), *t0);
    space_.at(0).expected = extent_of(*t0);
    space_.adopt(0, *t0);
    space_.publish(0, std::move(t0));
    const auto& listed = space_.listed();
    bool from_manifest = listed && listed->manifest.format == "lmdb" &&
                         listed->manifest.lmdb_datum == datum_ && listed->all_listed(1);
    for (std::size_t k = 1; from_manifest && k < shard_count(); ++k)
      from_manifest = listed->entries[k]->min_record.has_value();
    if (from_manifest) {
      space_.set_extents_from("the manifest " + listed->manifest.path.string());
      for (std::size_t k = 1; k < shard_count(); ++k) {
        const manifest_entry& e = *listed->entries[k];
        check_listed(space_.at(k), e);
        space_.at(k).expected = shard_extent{e.records, static_cast<std::size_t>(*e.min_record),
                                             static_cast<std::size_t>(e.max_record)};
      }
    } else {
      space_.set_extents_from("its scan at construction");
      std::uint64_t at = space_.at(0).expected.records;
      for (std::size_t k = 1; k < shard_count(); ++k) {
        const auto t = open_table(space_.path(k), at, datum_, immutable_, max_readers_);
        check_identity(space_.at(k), *t);
        space_.at(k).expected = extent_of(*t);
        at += space_.at(k).expected.records;
      }
    }
    space_.number_records();
  }

  bool datum_, immutable_;
  unsigned max_readers_;
  std::size_t max_record_ = 0;
  bool fixed_ = true;
  // The shards, their record numbering, opening and environments' bound; declared last, so that
  // it is built after the options its callbacks read.
  shard_space space_;
};

}  // namespace gpufeed::detail::lmdb
