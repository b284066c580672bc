// gpufeed — HDF5 shards as a gpufeed source.
//
// Layouts. A shard holds one of:
//   fixed  a numeric dataset (default "data") of shape (N, d1, ..., dk): record i is row i, of
//          d1*...*dk elements.
//   blob   a 1-D uint8 dataset "data" and a 1-D unsigned "offsets" dataset beside it with N+1
//          entries: record i is data[offsets[i] .. offsets[i+1]). Offsets must start at 0, never
//          decrease and end at the data length (checked at open).
// Several shards form one record space in the order given; they must share layout, dtype and
// row shape. A 1-D integer label dataset, one entry per record, is read when the shards hold the
// `labels` dataset `gpufeed pack --labels` writes, or the one hdf5_options::label_dataset names.
//
// Read paths (hdf5_shard_info::read_path says which one each shard takes, and why it falls back).
// Debian's libhdf5 is built thread-safe, which means one global lock around every call: 8
// threads calling H5Dread read slower than one, while pread from the page cache scales with
// threads (docs/design.md, "HDF5: index at open, pread, own decode"). So HDF5 is used only at open time, to
// build an index of byte extents (H5Dget_offset for contiguous data; for every chunk, one index
// lookup through H5Dread_chunk with a capturing file driver, because 1.10.8's
// H5Dget_chunk_info[_by_coord] scan all chunks per call — see detail/hdf5/index_driver.hpp);
// reads then run in the calling thread without any lock:
//   pread_raw         contiguous data, or unfiltered chunks: each record (chunk part) copied
//                     straight into the caller's buffer from a read-only memory map of the
//                     shard (hdf5_options::reads; hdf5_shard_info::mapped), or read there by
//                     one pread on a shared read-only descriptor.
//   pread_decode      as above, plus work HDF5 would do, done by gpufeed in the calling thread:
//                     on chunks, deflate (libdeflate), shuffle and fletcher32 (verified), and the
//                     plugin filters h5py + hdf5plugin write — LZ4 (32004), Bitshuffle (32008;
//                     none, LZ4 or Zstd), Blosc (32001; any of its compressors and shuffles) and
//                     Zstd (32015) — decoded by liblz4, libzstd and libblosc, with no HDF5 plugin
//                     needed; and the byte swap of non-native byte order. A reader caches decoded
//                     chunks, so reading consecutive records of one compressed chunk decodes it
//                     once.
//   h5dread_fallback  compact, virtual or external storage, any other filter (nbit, scaleoffset,
//                     szip, other plugins: found as HDF5 finds them, HDF5_PLUGIN_PATH included),
//                     two compressing filters in one pipeline, types HDF5 must convert, and
//                     chunks never written: H5Dread of the record's hyperslab under gpufeed's
//                     HDF5 mutex. Correct, serialised.
// Records are always the bytes H5Dread with the dataset's native memory type would produce.
//
// Opening (hdf5_options::open). Lazy by default: the first shard is opened at construction, every
// other one when a record of it is first used (read, record_size of a blob record, label,
// decode_unit unless the manifest states the shard's band height), once and thread-safely
// (detail/record_space/lazy_slot.hpp), so a rank opens only the shards its records lie in.
// Their record counts and largest records come up front from `gpufeed pack`'s manifest.json
// beside the first shard, else from a header read per shard (closed again); a shard that no
// longer matches them is a format_error naming it. shards() describes every shard and so opens
// them all; shard_info(k) and shards_opened() do not open. eager opens all at construction.
//
// Costs. A compressed chunk is always decoded whole, its sizes checked against the chunk's and
// its Adler-32 (deflate) and fletcher32 checked, so damage those detect is reported, never
// delivered (LZ4, Zstd frames without a checksum, Blosc and Bitshuffle carry no checksum of the
// data: a flipped literal there decodes to other bytes, as it does in HDF5). Decoded chunks go
// to one cache shared by every reader of the source (every worker of every loader on it):
// a chunk one worker is decoding is waited for by the others, not decoded twice. Its byte
// budget is hdf5_options::decode_cache_bytes, or automatic: sized when a loader starts
// (plan_reads) to hold a block_shuffled window's decode units plus the prefetch look-ahead, at
// least 64 MiB. Its eviction rule (detail/unit_cache/stripes.hpp) then decodes each chunk
// at most once per epoch per rank; decode_stats() counts chunks decoded, decoded against
// delivered bytes and the cache's peak. The budget counts readers' decode scratch too (a
// chunk's stored bytes and filter stages): N workers never hold N chunks' scratch beyond it.
// Heap memory, never pinned; it keeps up to its budget
// for the source's life (drop_decoded_chunks() frees what no reader holds). Reading records of
// a chunk of R rows in full random order still inflates R rows per record unless the budget
// holds the whole data: prefer sample_order::block_shuffled, or chunks of one or a few records.
// Blob offsets and labels are held in memory (8 bytes per record each); chunk extents take 24
// bytes per chunk.
//
// Read-ahead: will_need(first, count) advises the kernel (posix_fadvise WILLNEED) of the file
// extents those records will read — the contiguous bytes, or every chunk of the bands covering
// them — so reads of data not in the page cache become whole-extent reads started early.
//
// Errors (each names the shard file, and the record where there is one; with lazy opening a
// shard's open errors come from the call that first uses it, and again from each later use):
//   io_error           the file cannot be opened, or a read fails or ends early (it shrank)
//   format_error       not HDF5, truncated or damaged, missing dataset, bad offsets or labels,
//                      extents past the end of the file, shards that disagree
//   unsupported_error  a data dtype that is not an integer or float of 1, 2, 4 or 8 bytes
//   corrupt_error      fletcher32 mismatch or a corrupt deflate stream in a chunk
//   library_error      HDF5 failed otherwise (its own message in status_text)
//   config_error       an index out of range, a destination buffer too small
// HDF5's automatic error-stack printing is off for gpufeed's own calls (and restored after).
#pragma once

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

#include "gpufeed/decode_stats.hpp"
#include "gpufeed/detail/hdf5/decode_unit.hpp"
#include "gpufeed/detail/hdf5/manifest_url.hpp"
#include "gpufeed/detail/hdf5/read_ahead.hpp"
#include "gpufeed/detail/hdf5/record_names.hpp"
#include "gpufeed/detail/hdf5/shard_descriptions.hpp"
#include "gpufeed/detail/hdf5/source_reader.hpp"
#include "gpufeed/detail/hdf5/source_state.hpp"
#include "gpufeed/detail/pack_directory.hpp"
#include "gpufeed/detail/shard_paths.hpp"
#include "gpufeed/detail/unit_cache/automatic_budget.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/hdf5_options.hpp"
#include "gpufeed/remote_stats.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed {

// Models gpufeed::source, labeled_source, fixed_size_aware_source, reader_source,
// decode_unit_source, read_planning_source, read_ahead_source, decode_stats_source,
// remote_stats_source, file_naming_source and record_naming_source. Move-only. Readers share the source's state (open
// shards, the decoded-chunk cache): a reader stays valid when its source is moved or destroyed.
class hdf5_source {
 public:
  // Shards, in record order, as users write them: one path or name, a braced list of names
  // (`hdf5_source({"train-00000.h5", "train-00001.h5"})`; const char*, std::string and path
  // mixed), or any range of path-like values (std::vector<std::string>, std::vector<path>, ...).
  // config_error when the list is empty. One `gpufeed pack` output directory, or its
  // manifest.json, stands for the shards its manifest lists (`hdf5_source("shards/")`); a pack
  // directory without a complete manifest (the pack did not finish) is a format_error.
  // A shard may be a URL instead of a path: "http://…", "https://…" or "s3://bucket/key" (with
  // the remote component linked, gpufeed::remote), read with ranged GETs (never mapped; no
  // manifest is looked for beside it; docs/design.md, "Shards from URLs"). One URL of a pack's
  // manifest.json stands for the shards it lists, named by URLs beside it.
  explicit hdf5_source(const std::filesystem::path& shard, hdf5_options options = {})
      : hdf5_source(std::vector<std::filesystem::path>{shard}, std::move(options)) {}

  explicit hdf5_source(std::initializer_list<std::filesystem::path> shards,
                       hdf5_options options = {})
      : hdf5_source(std::vector<std::filesystem::path>(shards), std::move(options)) {}

  template <detail::shard_path_range R>
  explicit hdf5_source(R&& shards, hdf5_options options = {})
      : hdf5_source(detail::to_shard_paths(std::forward<R>(shards)), std::move(options)) {}

  explicit hdf5_source(std::vector<std::filesystem::path> shards, hdf5_options options = {})
      : state_(std::make_shared<detail::hdf5::source_state>(
            detail::expand_pack_directory(
                detail::hdf5::expand_manifest_url(std::move(shards), "hdf5"), "hdf5"),
            options)) {}

  hdf5_source(const hdf5_source&) = delete;
  hdf5_source& operator=(const hdf5_source&) = delete;
  hdf5_source(hdf5_source&&) noexcept = default;
  hdf5_source& operator=(hdf5_source&&) noexcept = default;
  ~hdf5_source() = default;

  // Records over all shards, in shard order.
  [[nodiscard]] std::uint64_t size() const noexcept { return state_ ? state_->size() : 0; }

  // Decoded bytes of record i; config_error when i is out of range.
  [[nodiscard]] std::size_t record_size(std::uint64_t i) const {
    const std::size_t k = state().locate(i);
    if (state_->fixed_record) return state_->fixed_record;  // every shard's rows match the first's
    return state_->shard(k).record_bytes(i - state_->first(k));
  }

  // Row bytes for the fixed layout, 0 for blob.
  [[nodiscard]] std::size_t fixed_record_size() const noexcept {
    return state_ ? state_->fixed_record : 0;
  }
  [[nodiscard]] std::size_t max_record_size() const noexcept {
    return state_ ? state_->max_record : 0;
  }

  // Models decode_unit_source: records of a compressed shard whose first element lies in the same
  // band of chunks (one chunk index along dimension 0: for the fixed layout, the chunks holding
  // every element of its rows, however many chunks a row spans) share a unit (top bit set, the
  // shard's key base k << 40, and the band's index in the shard); records of uncompressed shards
  // are units of their own (their index), and so are records of a shard that cannot be opened:
  // a hint for planning, it never throws that shard's error (the record's read reports it, to the
  // loader's error policy, instead of the planner). Equal units are consecutive records. An
  // unopened shard whose band height pack's manifest states (fixed layout, or uncompressed) is
  // answered from it without opening, with the value the opened shard gives (the open checks
  // that the manifest still holds); compressed blob shards need their offsets, so asking opens
  // the record's shard.
  [[nodiscard]] std::uint64_t decode_unit(std::uint64_t i) const {
    return detail::hdf5::decode_unit_of(state(), i);
  }

  class reader;

  // Thread-safe. Writes record_size(i) bytes to dst. Decoder state is per call here (chunks
  // still come from the shared cache); readers from make_reader() keep theirs and are the fast
  // path for compressed shards.
  void read(std::uint64_t i, std::span<std::byte> dst) const;

  // True when labels were read: hdf5_options::label_dataset says which dataset (by default the
  // one `gpufeed pack --labels` writes, when the shards hold it).
  [[nodiscard]] bool has_labels() const noexcept { return state_ && state_->labels; }

  // Label of record i, widened to int64. config_error without labels or out of range.
  [[nodiscard]] std::int64_t label(std::uint64_t i) const {
    const std::size_t k = state().locate(i);
    if (!state_->labels) {
      error_context ctx;
      ctx.record = i;
      throw config_error(std::string("this hdf5_source has no labels: its shards hold no '") +
                             pack_label_dataset +
                             "' dataset (write one with `gpufeed pack --labels`, or name the "
                             "shards' label dataset in hdf5_options::label_dataset)",
                         std::move(ctx));
    }
    return state_->shard(k).labels[static_cast<std::size_t>(i - state_->first(k))];
  }

  [[nodiscard]] reader make_reader() const;

  // Models read_planning_source: a loader's plan raises the automatic cache budget to what its
  // window and look-ahead need (detail/unit_cache/automatic_budget.hpp); the budget never
  // shrinks, so loaders sharing the source get the largest. No effect with an explicit
  // decode_cache_bytes.
  // Remote units are read as the plan's order says (remote_units.hpp's unit_mode_of: in
  // shuffled order each record is one ranged GET).
  void plan_reads(const read_plan& p) const {
    const auto& st = state();
    const auto mode = detail::hdf5::unit_mode_of(p);
    st.unit_mode.store(mode, std::memory_order_relaxed);
    for (std::size_t k = 0; k < st.shard_count(); ++k)
      if (const auto* z = st.space.if_open(k)) detail::hdf5::set_unit_mode(*z, mode);
    if (!state().explicit_budget)
      state_->cache->raise_budget(detail::unit_cache::automatic_cache_budget(state_->units, p));
  }

  // Models read_ahead_source: advises the extents records [first, first + count) read (clipped
  // to the source); see "Read-ahead" above. Shards not opened yet are not advised (opening
  // is I/O; their first read opens them).
  void will_need(std::uint64_t first, std::uint64_t count) const noexcept {
    if (state_) detail::hdf5::advise_source_records(*state_, first, count);
  }

  // Models device_decoding_source: how its compressed units take a device cache (the first
  // shard's chunking; place_bytes 0 when its chunks cannot be decoded on a device), for a
  // loader that decodes there (docs/design.md, "GPU decode in the loader").
  [[nodiscard]] detail::device_decode::device_units device_units() const noexcept {
    return state_ ? state_->device_units : detail::device_decode::device_units{};
  }

  // Models decode_stats_source: counters since the source was opened, over all its readers.
  [[nodiscard]] ::gpufeed::decode_stats decode_stats() const { return state().cache->stats(); }

  // Models remote_stats_source: the requests of its shards named by URLs since they were opened,
  // over the shards opened now (remote false, all zero, when every shard is local).
  [[nodiscard]] ::gpufeed::remote_stats remote_stats() const {
    ::gpufeed::remote_stats r;
    const auto& st = state();
    for (std::size_t k = 0; k < st.shard_count(); ++k)
      if (const auto* z = st.space.if_open(k)) detail::hdf5::add_to(r, detail::hdf5::remote_stats_of(*z));
    return r;
  }

  // Frees the decoded chunks no reader is using (the budget is kept).
  void drop_decoded_chunks() const noexcept {
    if (state_) state_->cache->drop_unused();
  }
  // Forgets the decoded chunks no reader is using, so that the next reads decode them again, but
  // keeps their memory (within the budget, counted in the cache's bytes) for those decodes:
  // decoding into memory the allocator just handed back first faults in and zeroes fresh pages,
  // which the cache's own evictions never pay (they reuse the evicted buffers). For measuring
  // decode rates epoch after epoch; drop_decoded_chunks() gives the memory back.
  void forget_decoded_chunks() const noexcept {
    if (state_) state_->cache->forget_unused();
  }

  // Every shard, in record order. Opens any shard not opened yet (so it may throw that shard's
  // open error): describing a shard takes opening it. shard_info(k) does not open.
  [[nodiscard]] const std::vector<hdf5_shard_info>& shards() const {
    const auto& st = state();
    std::call_once(*info_once_, [&] { info_ = detail::hdf5::describe_all_shards(st); });
    return info_;
  }

  // Shard k as known now: its description when opened, else (opened == false) only its path,
  // place and record count. config_error when k is out of range.
  [[nodiscard]] hdf5_shard_info shard_info(std::size_t k) const {
    return detail::hdf5::describe_shard(state(), k);
  }

  // Models file_naming_source: the shard holding record i, as given (a URL redacted), without
  // opening it.
  // config_error when i is out of range.
  [[nodiscard]] const std::filesystem::path& file_of(std::uint64_t i) const {
    return state().file_of(i);
  }

  // Models record_naming_source: record i's input name from its shard's names table (names/data
  // + names/offsets, which `gpufeed pack` writes; detail/hdf5/record_names.hpp), read from the
  // file on each call — an open and three small reads, for error paths — or nullopt when the
  // shard has no table or is named by a URL (names are not fetched over HTTP). config_error when
  // i is out of range, format_error for a damaged table.
  [[nodiscard]] std::optional<std::string> name_of(std::uint64_t i) const {
    const auto& st = state();
    const std::size_t k = st.locate(i);
    if (detail::hdf5::is_shard_url(st.space.path(k))) return std::nullopt;
    return detail::hdf5::read_record_name(st.file_of(i), st.first(k + 1) - st.first(k),
                                          i - st.first(k), i);
  }

  // Shards opened so far (1 after construction with lazy opening, every one with eager).
  [[nodiscard]] std::size_t shards_opened() const noexcept {
    return state_ ? state_->space.opens() : 0;
  }

  // True when any opened shard reads through H5Dread (serialised by HDF5's lock).
  [[nodiscard]] bool uses_fallback() const noexcept {
    return state_ && detail::hdf5::any_opened_fallback(*state_);
  }

 private:
  const detail::hdf5::source_state& state() const {
    if (!state_) throw config_error("hdf5_source: use of a moved-from source");
    return *state_;
  }

  // Shared with readers, which may outlive the source.
  std::shared_ptr<detail::hdf5::source_state> state_;
  // shards(): built once, after opening every shard (call_once retries after a throw).
  std::unique_ptr<std::once_flag> info_once_ = std::make_unique<std::once_flag>();
  mutable std::vector<hdf5_shard_info> info_;
};

}  // namespace gpufeed

// hdf5_source::reader, and the members that need it whole.
#include "gpufeed/hdf5_source_reader.hpp"
