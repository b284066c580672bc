// gpufeed — the shared state of an hdf5_source: its shards in record order, each opened on first
// use (hdf5_options::open) or all at construction.
//
// What the source knows before a shard is opened: its record count and largest record
// (shard_extent.hpp: from pack's manifest, else a header read), enough to build the record space
// and size the loader's slots. Opening it (descriptor, chunk index, blob offsets, labels) waits
// until a record of it is first located for a read, a size, a label or a decode unit, so a rank
// opens only the shards its partition touches. Open errors are typed and name the shard, as at
// construction, and are thrown to every caller until an open succeeds. The record space itself
// (numbering, lazy open, manifest entries, descriptor bound) is the format-free
// detail/record_space/shard_space.hpp; what is here is HDF5's.
//
// Descriptors are bounded (hdf5_options::max_open_shards, detail/shard_lru.hpp): an opened
// shard's index stays, its descriptors (the pread file; the fallback's HDF5 file and dataset)
// are closed when others need room and reopened by the next read. Every use of a shard's
// descriptors holds a pin (pin()): shard() alone gives the index, not an open descriptor.
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

#include "gpufeed/detail/hdf5/device_stage.hpp"
#include "gpufeed/detail/hdf5/open_shard.hpp"
#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/detail/hdf5/shard_extent.hpp"
#include "gpufeed/detail/hdf5/unit_geometry.hpp"
#include "gpufeed/detail/pack_manifest.hpp"
#include "gpufeed/detail/record_space/open_kind.hpp"
#include "gpufeed/detail/record_space/shard_space.hpp"
#include "gpufeed/detail/shard_lru.hpp"
#include "gpufeed/detail/unit_cache/automatic_budget.hpp"
#include "gpufeed/detail/unit_cache/shared_chunk_cache.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/hdf5_options.hpp"

namespace gpufeed::detail::hdf5 {

// Chunk numbers of shard k start at k << shard_key_bits (decode units and cache keys stay unique
// across shards without knowing unopened shards' chunk counts: 2^40 chunks per shard).
inline constexpr int shard_key_bits = 40;

using shard_space = record_space::shard_space<shard_index, shard_extent>;
using shard_slot = shard_space::slot;

// Rows per decode band of an opened shard, as pack's manifest states it (band_rows): 0 when its
// records decode alone (not chunked and compressed), chunk rows along dimension 0 for the fixed
// layout, nullopt for compressed blob shards (a record's band follows from its byte offset).
inline std::optional<std::uint64_t> band_rows_of(const shard_index& s) {
  if (s.remote_band) return s.blob ? std::nullopt : std::optional<std::uint64_t>(s.remote_band);
  if (s.kind != read_kind::chunked || s.pipeline.empty()) return 0;
  if (s.blob) return std::nullopt;
  return s.grid.chunk[0];
}

struct source_state {
  hdf5_options req;
  shard_space space;  // the shards, their record numbering and their opening
  std::vector<std::uint64_t> key_base;  // first source-wide chunk number of each shard
  std::size_t fixed_record = 0;         // row bytes (fixed layout), 0 for blob
  std::size_t max_record = 0;
  bool labels = false;
  unit_cache::unit_geometry units;  // for the cache budget (the first shard's)
  device_decode::device_units device_units;  // for device decode (the first shard's)
  bool explicit_budget = false;     // hdf5_options::decode_cache_bytes was set
  std::unique_ptr<unit_cache::shared_chunk_cache> cache;  // shared by every reader; its own lock
  // Each shard as errors and descriptions name it: its path, or its URL redacted (a presigned
  // query or userinfo is needed to open it, never shown).
  std::vector<std::filesystem::path> shown;
  // How remote units are read (remote_units.hpp), as the last loader's plan said.
  mutable std::atomic<remote::unit_mode> unit_mode{remote::unit_mode::windows};

  [[nodiscard]] std::uint64_t size() const noexcept { return space.size(); }
  [[nodiscard]] std::size_t shard_count() const noexcept { return space.shard_count(); }
  [[nodiscard]] bool blob() const noexcept { return fixed_record == 0; }
  [[nodiscard]] bool is_open(std::size_t k) const noexcept { return space.is_open(k); }
  // First global record of shard k; first(shard_count()) == size().
  [[nodiscard]] std::uint64_t first(std::size_t k) const noexcept { return space.first(k); }

  [[noreturn]] void out_of_range(std::uint64_t i) const {
    error_context ctx;
    ctx.record = i;
    throw config_error("record index " + std::to_string(i) + " is out of range (the source has " +
                           std::to_string(size()) + " records)",
                       std::move(ctx));
  }

  // The shard holding global record i; config_error when i >= size().
  [[nodiscard]] std::size_t locate(std::uint64_t i) const {
    if (i >= size()) out_of_range(i);
    return space.locate(i).shard;
  }

  // The shard file holding global record i (a URL redacted), without opening it; config_error
  // when i >= size().
  [[nodiscard]] const std::filesystem::path& file_of(std::uint64_t i) const {
    if (i >= size()) out_of_range(i);
    return shown[space.locate(i).shard];
  }

  // Shard k, opened on first use. Thread-safe: one caller opens, the others wait for it.
  [[nodiscard]] const shard_index& shard(std::size_t k) const {
    const shard_slot& sl = space.at(k);
    return space.open(
        k, [&] { return std::make_unique<shard_index>(open_shard(sl.path, req)); },
        [&](shard_index& opened) {
          check_identity(sl, opened);
          if (k > 0) check_matches(opened, shard(0));
          check_expected(opened, sl.expected);
          opened.description.first_record = first(k);
          set_unit_mode(opened, unit_mode.load(std::memory_order_relaxed));
        });
  }

  // Shard k opened (shard(k)) with its descriptors open until the pin's end: what every pread,
  // fadvise and H5Dread of it holds. Throws shard(k)'s errors, or a reopen's (io_error, "too many
  // open files" when no descriptor is left; format_error when the file was replaced).
  [[nodiscard]] shard_pin pin(std::size_t k) const {
    (void)shard(k);
    return shard_pin(&space.lru(), k);
  }

  // format_error naming the shard when it is not the file pack's manifest lists under its name
  // (size, fingerprint): shards swapped or replaced since pack.
  void check_identity(const shard_slot& sl, const shard_index& s) const {
    if (sl.listed)
      detail::check_identity(space.listed()->manifest, manifest_place(sl.path).second, *sl.listed,
                             s.file.source());
  }

  // format_error when an opened shard is not what was known of it before (the manifest or a
  // header read): its record count, largest record or decode band height.
  void check_expected(const shard_index& s, const shard_extent& e) const {
    const auto band = band_rows_of(s);
    const auto text = [](const std::optional<std::uint64_t>& b) {
      return b ? std::to_string(*b) : std::string("unknown");
    };
    if (s.records != e.records || s.max_record > max_record ||
        (e.band_rows && e.band_rows != band))
      throw format_error("shard holds " + std::to_string(s.records) + " records (largest " +
                             std::to_string(s.max_record) + " bytes, decode bands of " +
                             text(band) + " rows) but " + space.extents_from() + " said " +
                             std::to_string(e.records) + " (largest " +
                             std::to_string(e.max_record) + ", bands of " +
                             text(e.band_rows) + "): the shard changed since; rewrite the "
                             "manifest or reopen",
                         file_context(s.path));
  }

  // format_error when shard s disagrees with the first shard on layout, dtype, row shape or
  // labels.
  static void check_matches(const shard_index& s, const shard_index& s0) {
    const auto& d = s.description;
    const auto& d0 = s0.description;
    const bool same_rows =
        std::equal(d.shape.begin() + 1, d.shape.end(), d0.shape.begin() + 1, d0.shape.end());
    // Byte order may differ: records are delivered in native order either way.
    auto value_type = [](const std::string& t) { return t.substr(0, t.find(' ')); };
    if (d.layout != d0.layout || (!s.blob && (value_type(d.dtype) != value_type(d0.dtype) ||
                                              !same_rows || s.element_size != s0.element_size))) {
      throw format_error("shard does not match the first shard '" + s0.path + "' (" + d.layout +
                             " " + d.dtype + " vs " + d0.layout + " " + d0.dtype +
                             ", or a different row shape)",
                         file_context(s.path));
    }
    // Labels left unset are read where the shards hold pack's dataset: all of them or none.
    if (d.label_dataset != d0.label_dataset) {
      const bool here = !d.label_dataset.empty();
      throw format_error(std::string("shard ") + (here ? "has a '" : "has no '") +
                             pack_label_dataset + "' dataset and the first shard '" + s0.path +
                             "' " + (here ? "has none" : "has one") +
                             " (set hdf5_options::label_dataset = \"\" to read no labels)",
                         file_context(s.path));
    }
  }

  // Opens the first shard (it fixes layout, dtype, row shape and labels) and learns the others'
  // extents (or, eager, opens them all). format_error when shards disagree; config_error naming
  // the (first) file when no shard holds a record.
  source_state(const std::vector<std::filesystem::path>& paths, const hdf5_options& options)
      : req(options),
        space(given(paths), options.max_open_shards, [](const shard_index& s) { s.file.reopen(); },
              [](const shard_index& s) noexcept { close_descriptors(s); }) {
    for (std::size_t k = 0; k < shard_count(); ++k)
      shown.push_back(is_shard_url(space.path(k))
                          ? std::filesystem::path(remote::redact_url(space.path(k).native()))
                          : space.path(k));
    // Pack's manifest is looked for beside a local first shard only (none is fetched over HTTP).
    if (!is_shard_url(space.path(0)))
      space.find_manifest([](const pack_manifest& m) { return m.format != "lmdb"; });
    // The first shard, opened now.
    {
      shard_slot& s0 = space.at(0);
      auto z0 = std::make_unique<shard_index>(open_shard(s0.path, req));
      check_identity(s0, *z0);
      s0.expected = shard_extent{z0->records, z0->max_record, band_rows_of(*z0)};
      space.adopt(0, *z0);
      space.publish(0, std::move(z0));
    }
    const shard_index& z = *space.if_open(0);
    fixed_record = z.blob ? 0 : z.row_bytes;
    labels = !z.description.label_dataset.empty();
    // The cache budget from the first shard's chunking (unopened shards' is unknown here; shards
    // share their row shape, and pack writes them alike).
    units = unit_geometry_of(z, shard_count());
    device_units = device_units_of(z, shard_count());
    explicit_budget = req.decode_cache_bytes.has_value();
    cache = std::make_unique<unit_cache::shared_chunk_cache>(
        explicit_budget ? *req.decode_cache_bytes
                        : unit_cache::automatic_cache_budget(units, read_plan{}));
    std::vector<std::unique_ptr<shard_index>> eager = learn_extents();
    space.number_records();
    for (std::size_t k = 0; k < shard_count(); ++k) {
      key_base.push_back(static_cast<std::uint64_t>(k) << shard_key_bits);
      max_record = std::max<std::size_t>(max_record, space.at(k).expected.max_record);
    }
    for (std::size_t k = 1; k < eager.size(); ++k) {  // opened by an eager learn_extents()
      eager[k]->description.first_record = first(k);
      space.publish(k, std::move(eager[k]));
    }
    if (size() == 0) {  // a loader would refuse it without knowing which files were empty
      const auto& d = z.description;
      std::string shape;
      for (std::size_t k = 0; k < d.shape.size(); ++k)
        shape += (k ? ", " : "") + std::to_string(d.shape[k]);
      throw config_error("dataset '" + req.dataset + "' holds no records (shape (" + shape + ")" +
                             (shard_count() > 1 ? ", and so do the other " +
                                                      std::to_string(shard_count() - 1) + " shards"
                                                : std::string()) +
                             ")",
                         file_context(z.path));
    }
  }

 private:
  // The paths, or config_error when there are none.
  static const std::vector<std::filesystem::path>& given(
      const std::vector<std::filesystem::path>& paths) {
    if (paths.empty()) throw config_error("hdf5_source: no shard paths given");
    return paths;
  }

  // The LRU's close: shard s's descriptors closed, its index kept. The fallback's HDF5 handles
  // are reopened by its next read (fallback_stale), under the library mutex.
  static void close_descriptors(const shard_index& s) noexcept {
    s.file.close();
    if (s.kind == read_kind::fallback) {
      library_lock lock;
      s.dataset.reset();
      s.h5file.reset();
      s.fallback_stale = true;
    }
  }

  // format_error naming the manifest and field when shard sl's entry e declares more records or a
  // larger record than its file can hold (declared_bytes_limit of its size; a file that cannot
  // be sized is bounded by that limit's floor, and fails when opened): before the record space
  // and the loader's slots are sized by them.
  void check_listed(const shard_slot& sl, const manifest_entry& e, const shard_index& z) const {
    std::error_code ec;
    const std::uint64_t size = std::filesystem::file_size(sl.path, ec);
    const std::uint64_t limit = declared_bytes_limit(ec ? 0 : size);
    const std::string name = manifest_place(sl.path).second;
    const std::string of = "a file of " + std::to_string(ec ? 0 : size) + " bytes";
    // Each record takes an 8-byte offset (blob) or its row (fixed layout; counted as at most 8
    // bytes, so that rows compressed past 4096-fold are not refused) of declared bytes.
    const std::uint64_t per_record =
        z.blob ? 8 : std::clamp<std::uint64_t>(z.row_bytes, 1, 8);
    check_field(space.listed()->manifest, name, "records", e.records, limit / per_record,
                of + " declares at most " + std::to_string(limit) + " bytes, " +
                    std::to_string(per_record) + " a record");
    check_field(space.listed()->manifest, name, "max_record", e.max_record, limit,
                of + " declares records of at most " + std::to_string(limit) + " bytes");
  }

  // Record counts, largest records and band heights of shards 1.., without opening them: the
  // manifest beside the first shard when it lists every one, else a header read each. Eager
  // opens read them then, and return the opened shards (index k for shard k; 0 is empty).
  std::vector<std::unique_ptr<shard_index>> learn_extents() {
    std::vector<std::unique_ptr<shard_index>> opened;
    if (shard_count() == 1) {
      space.set_extents_from("opened");
      return opened;
    }
    const shard_index& z = *space.if_open(0);
    const auto& listed = space.listed();
    if (record_space::open_kind_of(req.open) == record_space::open_kind::eager) {
      space.set_extents_from("opened");
      opened.resize(shard_count());
      for (std::size_t k = 1; k < shard_count(); ++k) {
        shard_slot& sl = space.at(k);
        opened[k] = space.lru().open_first(
            [&] { return std::make_unique<shard_index>(open_shard(sl.path, req)); });
        check_identity(sl, *opened[k]);
        check_matches(*opened[k], z);
        space.adopt(k, *opened[k]);
        sl.expected = shard_extent{opened[k]->records, opened[k]->max_record,
                                   band_rows_of(*opened[k])};
      }
      return opened;
    }
    if (listed && listed->all_listed(1)) {
      for (std::size_t k = 1; k < shard_count(); ++k) {
        const manifest_entry& e = *listed->entries[k];
        check_listed(space.at(k), e, z);
        space.at(k).expected = shard_extent{e.records, e.max_record, e.band_rows};
        // records: 0 would drop the shard from the record space unopened (and shift every later
        // index): the shard's header says what it holds.
        if (e.records == 0) {
          const shard_extent h = read_extent(space.path(k), req.dataset, z.blob, z.row_bytes);
          if (h.records != 0)
            throw format_error("the manifest " + listed->manifest.path.string() +
                                   " says records: 0 for the shard, which holds " +
                                   std::to_string(h.records) + " records",
                               file_context(shown[k].string()));
        }
      }
      space.set_extents_from("the manifest " + listed->manifest.path.string());
      return opened;
    }
    space.set_extents_from("its header read");
    for (std::size_t k = 1; k < shard_count(); ++k)
      space.at(k).expected = read_extent(space.path(k), req.dataset, z.blob, z.row_bytes);
    return opened;
  }
};

}  // namespace gpufeed::detail::hdf5
