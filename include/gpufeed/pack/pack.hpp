// gpufeed — packing many small files into HDF5 or LMDB shards that gpufeed's sources read.
//
//   auto inputs = gpufeed::list_directory("images/", /*labels_from_subdirs=*/true);
//   gpufeed::pack_options o;
//   o.label_names = gpufeed::directory_labels("images/");     // recorded in the manifest
//   gpufeed::pack_result r = gpufeed::pack(inputs, "shards/", o);
//   gpufeed::hdf5_source src(r.shards);  // reads the shards' `labels` dataset by default
//
// Formats: the writers a program has come from the CMake components it links. gpufeed::pack_hdf5
// writes (and verifies) HDF5 shards and needs only the hdf5 component; gpufeed::pack_lmdb writes
// LMDB shards and needs only the lmdb component; gpufeed::pack has whichever of the two this
// gpufeed has. They define GPUFEED_PACK_HDF5 / GPUFEED_PACK_LMDB (set them by hand without CMake).
// Asking pack() for a format this build has no writer for is a config_error naming the
// component. pack() and verify_pack() live in an inline namespace named after the formats, so
// translation units built with different formats never share a definition.
//
// Output (out_dir/):
//   <prefix>-00000.h5 ...   HDF5 blob layout (hdf5_source detects it): `data` uint8 (contiguous,
//                           or chunked and compressed: see `compression`), `offsets` uint64[N+1],
//                           `labels` int64[N] when the inputs have labels, `names/data` +
//                           `names/offsets` (the record names, blob layout again). repack_hdf5
//                           writes the fixed layout instead: `data` of the source's type and
//                           shape, chunks of whole rows, and no names.
//   <prefix>-00000.lmdb/    one LMDB environment per shard (data.mdb only): key = the record's
//                           global index as 10 decimal digits, "_" and its name
//                           ("0000000042_train/cat/0042.jpg"; digits alone when the key would
//                           pass LMDB's 511 bytes), value = the file's bytes (or a
//                           Caffe Datum {data, label} with lmdb_datum; raw values cannot hold
//                           labels, so labelled inputs need lmdb_datum or HDF5).
//   manifest.json           format, shards (file, records, bytes, first_record, max_record,
//                           min_record, HDF5 band_rows: rows decoded together, 0 uncompressed;
//                           crc32 of the record bytes in order), totals, label names, options,
//                           version, the order (shuffled or not, seed) and `names`: record index
//                           -> input name. Sources read the shard fields to open shards lazily.
// Order: records are shuffled by default (a permutation of the inputs fixed by `seed`, the same on
// every machine), because inputs listed from class folders come sorted by class and a loader's
// locality-aware order (sample_order::block_shuffled) mixes records only within a window of
// chunks. `shuffle = false` keeps the input order. A shard takes records in that order while its
// bytes stay within shard_bytes.
// Compression (HDF5): chunks of chunk_bytes (1 MiB) of the record stream, compressed with
// deflate, LZ4 (32004), Zstd (32015) or Bitshuffle-LZ4 (32008) (pack_codec.hpp) in the filter
// formats h5py + hdf5plugin read (the encoders of detail/codec/, chosen by pack/detail/codecs.hpp)
// and that hdf5_source decodes in its workers. Why 1 MiB:
// it is one decode unit of the locality-aware order, decodes in well under a millisecond with
// LZ4/Zstd, keeps a reader's decoded-chunk cache small, and the codecs' ratio has stopped
// improving long before it; the chunk index stays small (1024 entries per GiB).
// Worker threads read the input files (and compress the chunks) ahead of one writer, at most
// 2 x threads + 2 batches of 4 MiB ahead, so memory stays bounded whatever the file sizes.
//
// Guarantees:
//  - Deterministic: the same inputs and options give byte-identical shards and manifest,
//    whatever the thread count (no time stamps; one writer; work split by bytes, not timing).
//    LMDB shards are byte-identical between machines with the same page size.
//  - pack writes only out_dir/<prefix>-NNNNN.{h5,lmdb}, out_dir/manifest.json and hidden
//    temporaries of those names; input names are stored as data, never used as paths. A
//    non-empty out_dir is refused unless `force`, which removes only what an earlier pack wrote
//    (see pack/detail/output.hpp). Shards are written under temporary names and renamed when
//    complete and synced; the manifest comes last. On failure pack removes what it wrote
//    (except when verify finds a difference: the shards stay for inspection, with no manifest);
//    so it does when options.cancelled says stop (cancelled_error).
//  - Errors: io_error naming the input file that cannot be read (or changed size while
//    packing); config_error for bad options or a refused out_dir (also one that holds an input,
//    checked before anything is deleted); format_error for a bad list
//    file line; corrupt_error when verify finds a record that differs; library_error when HDF5,
//    LMDB or zlib fail.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpufeed/pack/detail/codecs.hpp"
#include "gpufeed/pack/detail/formats.hpp"
#include "gpufeed/pack/detail/listing.hpp"
#include "gpufeed/pack/detail/manifest.hpp"
#include "gpufeed/pack/detail/output.hpp"
#include "gpufeed/pack/detail/plan.hpp"
#include "gpufeed/pack/detail/reading.hpp"
#include "gpufeed/pack/detail/verify.hpp"
#include "gpufeed/pack/pack_codec.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/version.hpp"

namespace gpufeed {

enum class shard_format { hdf5, lmdb };

inline const char* to_string(shard_format f) noexcept {
  return f == shard_format::lmdb ? "lmdb" : "hdf5";
}

struct pack_input {
  std::filesystem::path path;         // the file to read
  std::string name;                   // stored with the record (HDF5: names/, LMDB: in the key);
                                      // any bytes but NUL
  std::optional<std::int64_t> label;  // every input has one, or none has
};

// The first-level subdirectories of root, sorted byte-wise: label i is the i-th name. Symlinks
// to directories are not counted (list_directory does not descend into them).
inline std::vector<std::string> directory_labels(const std::filesystem::path& root) {
  return detail::pack::subdirectory_names(root);
}

// The regular files under root, recursively, sorted byte-wise by their path relative to root
// ('/'-separated), which is also their name. With labels_from_subdirs, a file's label is the
// index of its first-level subdirectory in directory_labels(root) (as torchvision's ImageFolder
// numbers classes), and a file directly in root is a config_error.
// Symlinks: a link to a regular file is followed when its resolved target lies inside root (a
// link leaving root is a format_error naming it: pack reads only what it was pointed at; name
// such files in a list file instead); a dangling link is an io_error; links to directories are
// not followed (no loops, no duplicates). FIFOs, sockets and devices are skipped (not data, and
// opening a FIFO would block): counted in *skipped when given, with the first one's name.
struct skipped_entries {
  std::uint64_t count = 0;
  std::string first;  // relative to root, as a name
};
inline std::vector<pack_input> list_directory(const std::filesystem::path& root,
                                              bool labels_from_subdirs,
                                              skipped_entries* skipped = nullptr) {
  detail::pack::skipped_count sk;
  const auto files = detail::pack::list_files(root, &sk);
  if (skipped) *skipped = {sk.count, sk.first};
  std::vector<std::string> labels;
  if (labels_from_subdirs) labels = directory_labels(root);
  std::vector<pack_input> out;
  out.reserve(files.size());
  for (const auto& f : files) {
    pack_input in{f.path, f.name, std::nullopt};
    if (labels_from_subdirs) {
      const auto slash = f.name.find('/');
      if (slash == std::string::npos)
        throw config_error(
            "labels come from subdirectories, but this file is directly in the "
            "input directory",
            file_context(f.path));
      const auto it = std::lower_bound(labels.begin(), labels.end(), f.name.substr(0, slash));
      in.label = static_cast<std::int64_t>(it - labels.begin());
    }
    out.push_back(std::move(in));
  }
  return out;
}

// A list file: one input per line, "PATH" or "PATH<TAB>LABEL" (decimal int64); relative paths
// are resolved against the list file's directory; the name is PATH as written. Empty lines are
// skipped and a trailing CR is dropped. format_error (naming the list file and line) for a NUL
// byte, an empty path or a bad label.
inline std::vector<pack_input> read_list_file(const std::filesystem::path& list) {
  const auto entries = detail::pack::parse_list(detail::pack::read_text_file(list), list);
  const std::filesystem::path base = list.parent_path();
  std::vector<pack_input> out;
  out.reserve(entries.size());
  for (const auto& e : entries) {
    const std::filesystem::path p(e.path);
    out.push_back({p.is_absolute() ? p : base / p, e.path, e.label});
  }
  return out;
}

struct pack_progress {
  std::uint64_t files_done = 0, files_total = 0;
  std::uint64_t bytes_done = 0, bytes_total = 0;
  std::size_t shards_done = 0, shards_total = 0;
  double seconds = 0;  // since pack() began
  double files_per_second = 0, bytes_per_second = 0;
  double eta_seconds = 0;  // time left at the current byte rate
  bool verifying = false;  // files/bytes count records read back by verify
};

struct pack_options {
  shard_format format = shard_format::hdf5;
  std::uint64_t shard_bytes = 1ull << 30;  // target record bytes per shard
  // HDF5 only: none = contiguous, uncompressed (the pread_raw fast path); else chunked and
  // compressed (see "Compression" above).
  pack_compression compression;
  int deflate_level = 0;  // older spelling of compression = {deflate, level}; 0 = unset
  // Chunk size of compressed shards (capped at the shard's size; repack_hdf5 rounds it down to
  // whole rows, at least one). See "Compression" above for why 1 MiB.
  std::uint64_t chunk_bytes = 1ull << 20;
  bool shuffle = true;      // shuffle the records (see "Order" above); false keeps input order
  std::uint64_t seed = 0;   // the shuffle's seed, recorded in the manifest
  std::size_t threads = 0;       // reading (and compressing, verifying) threads; 0 = hardware
  std::string prefix = "shard";  // shard-00000.h5 / shard-00000.lmdb/
  bool lmdb_datum = false;       // LMDB only: values are Caffe Datum {data, label}
  bool verify = false;  // read every record back through hdf5_source/lmdb_source, compare crc32
  bool force = false;   // replace an earlier pack's output in a non-empty out_dir
  std::vector<std::string> label_names;  // label i's name, for the manifest (directory_labels)
  std::function<void(const pack_progress&)> progress;  // on the calling thread, ~10 times a second
  // Asked on the calling thread before each batch of about 4 MiB (and each shard verified):
  // true stops the pack, which removes every shard and temporary it wrote and throws
  // cancelled_error saying so (gpufeed pack sets it from SIGINT / SIGTERM).
  std::function<bool()> cancelled;
};

struct packed_shard {
  std::filesystem::path file;
  std::uint64_t first_record = 0, records = 0, bytes = 0;
  std::uint32_t crc32 = 0;  // zlib crc32 of the shard's record bytes, in record order
};

struct pack_result {
  shard_format format = shard_format::hdf5;
  bool labels = false, lmdb_datum = false;
  bool shuffled = false;
  std::uint64_t seed = 0;
  std::vector<std::uint64_t>
      input_of;  // record i holds inputs[input_of[i]] (source row for repack)
  std::vector<std::filesystem::path> shards;  // in record order: give them to the source as is
  std::vector<packed_shard> shard_info;
  std::uint64_t records = 0, bytes = 0;
  std::filesystem::path manifest;
  double seconds = 0;
};

inline namespace GPUFEED_PACK_FORMATS {

// Packs `inputs` into out_dir (see the top of this file).
pack_result pack(const std::vector<pack_input>& inputs, const std::filesystem::path& out_dir,
                 const pack_options& options = {});

#if defined(GPUFEED_PACK_HDF5)
// Repacks a dataset a user already has (any layout, chunking and filter hdf5_source reads; read
// through hdf5_source on `threads` workers) into gpufeed HDF5 shards of the fixed layout: `data`
// of the same native type and row shape, chunks of whole rows (chunk_bytes rounded down to whole
// rows, at least one), compressed with options.compression, and `labels` as hdf5_source reads
// them (label_dataset as hdf5_options::label_dataset: unset = "labels" when present, "" = none).
// A blob-layout source (an earlier pack's shard) is repacked in the blob layout.
// Records keep the source's row order unless options.shuffle (which reads rows at random: slow
// on compressed sources, whose chunks are then decoded once per record). options.format must be
// hdf5; errors of reading the source propagate as hdf5_source reports them (file and row).
struct repack_source {
  std::filesystem::path file;
  std::string dataset = "data";
  std::optional<std::string> label_dataset;
};
pack_result repack_hdf5(const repack_source& source, const std::filesystem::path& out_dir,
                        const pack_options& options);
#endif

// Reads every record of a pack's shards back through hdf5_source / lmdb_source and checks each
// shard's record count, bytes and crc32 against `result`: corrupt_error naming the shard when
// one differs (errors of the sources, e.g. a corrupt deflate chunk, propagate as they are).
void verify_pack(const pack_result& result, std::size_t threads = 0);

}  // inline namespace GPUFEED_PACK_FORMATS

}  // namespace gpufeed

#include "gpufeed/pack/detail/run.hpp"
