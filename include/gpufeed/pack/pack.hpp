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
//                           or chunked + deflate), `offsets` uint64[N+1], `labels` int64[N] when
//                           the inputs have labels, `names/data` + `names/offsets` (the record
//                           names, blob layout again).
//   <prefix>-00000.lmdb/    one LMDB environment per shard (data.mdb only): key = the record's
//                           global index as 10 decimal digits, value = the file's bytes (or a
//                           Caffe Datum {data, label} with lmdb_datum; raw values cannot hold
//                           labels, so labelled inputs need lmdb_datum or HDF5).
//   manifest.json           format, shards (file, records, bytes, first_record, crc32 of the
//                           record bytes in order), totals, label names, options, version.
// Records keep the input order; a shard takes records while its bytes stay within shard_bytes.
// Worker threads read the input files (and compress deflate chunks) ahead of one writer, at most
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
//    (except when verify finds a difference: the shards stay for inspection, with no manifest).
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
#include <vector>

#include "gpufeed/pack/detail/formats.hpp"
#include "gpufeed/pack/detail/listing.hpp"
#include "gpufeed/pack/detail/manifest.hpp"
#include "gpufeed/pack/detail/output.hpp"
#include "gpufeed/pack/detail/plan.hpp"
#include "gpufeed/pack/detail/reading.hpp"
#include "gpufeed/pack/detail/verify.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/version.hpp"

namespace gpufeed {

enum class shard_format { hdf5, lmdb };

inline const char* to_string(shard_format f) noexcept {
  return f == shard_format::lmdb ? "lmdb" : "hdf5";
}

struct pack_input {
  std::filesystem::path path;         // the file to read
  std::string name;                   // stored with the record (HDF5: names/); any bytes but NUL
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
// not followed (no loops, no duplicates). FIFOs, sockets and devices are skipped.
inline std::vector<pack_input> list_directory(const std::filesystem::path& root,
                                              bool labels_from_subdirs) {
  const auto files = detail::pack::list_files(root);
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
  // HDF5 only: 0 = contiguous, uncompressed (the pread_raw fast path); 1..9 = chunked + deflate.
  int deflate_level = 0;
  // Deflate chunk size (capped at the shard's size). 1 MiB: zlib's ratio stops improving long
  // before (32 KiB window), the chunk index stays small (1024 entries per GiB), and a reader's
  // decoded-chunk cache serves sequential records; a random read of a small record decodes its
  // whole chunk, so lower it for shuffled access to compressed shards.
  std::uint64_t chunk_bytes = 1ull << 20;
  std::size_t threads = 0;       // reading (and compressing, verifying) threads; 0 = hardware
  std::string prefix = "shard";  // shard-00000.h5 / shard-00000.lmdb/
  bool lmdb_datum = false;       // LMDB only: values are Caffe Datum {data, label}
  bool verify = false;  // read every record back through hdf5_source/lmdb_source, compare crc32
  bool force = false;   // replace an earlier pack's output in a non-empty out_dir
  std::vector<std::string> label_names;  // label i's name, for the manifest (directory_labels)
  std::function<void(const pack_progress&)> progress;  // on the calling thread, ~10 times a second
};

struct packed_shard {
  std::filesystem::path file;
  std::uint64_t first_record = 0, records = 0, bytes = 0;
  std::uint32_t crc32 = 0;  // zlib crc32 of the shard's record bytes, in record order
};

struct pack_result {
  shard_format format = shard_format::hdf5;
  bool labels = false, lmdb_datum = false;
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

// Reads every record of a pack's shards back through hdf5_source / lmdb_source and checks each
// shard's record count, bytes and crc32 against `result`: corrupt_error naming the shard when
// one differs (errors of the sources, e.g. a corrupt deflate chunk, propagate as they are).
void verify_pack(const pack_result& result, std::size_t threads = 0);

}  // inline namespace GPUFEED_PACK_FORMATS

}  // namespace gpufeed

#include "gpufeed/pack/detail/run.hpp"
