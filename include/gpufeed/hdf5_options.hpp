// gpufeed — the HDF5 source's vocabulary: the options it opens shards with and what it reports
// about each shard. A leaf header (no HDF5, no detail/) so that both hdf5_source.hpp and the
// detail/hdf5 code that fills these types name them directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gpufeed {

// The label dataset `gpufeed pack --labels` writes (int64, one entry per record).
inline constexpr const char* pack_label_dataset = "labels";

struct hdf5_options {
  std::string dataset = "data";  // fixed-shape dataset: record = one row along dimension 0
  // Labels: a 1-D integer dataset (any integer type, widened to int64), one entry per record.
  //   unset (default)  pack_label_dataset ("labels") when the first shard holds it, and then
  //                    every shard must (format_error naming the one that does not); no labels
  //                    when the first shard has none
  //   "name"           that dataset, required in every shard (format_error when one lacks it)
  //   "" (empty)       no labels, even when the shards hold them
  // hdf5_shard_info::label_dataset says what was read.
  std::optional<std::string> label_dataset;
  enum class layout_kind { automatic, fixed, blob };
  // automatic: blob when `dataset` is 1-D uint8 and an "offsets" dataset sits beside it
  // (record i = data[offsets[i] .. offsets[i+1])); otherwise fixed.
  layout_kind layout = layout_kind::automatic;
  // Byte budget of the cache of decoded chunks that all readers of the source share (heap
  // memory, never pinned). Unset (default): automatic, sized when a loader starts so that a
  // block_shuffled window's decode units plus the prefetch look-ahead fit (at least 64 MiB, at
  // most the decoded size of every chunk); with it each chunk is decoded at most once per
  // epoch. A smaller budget holds: chunks are then decoded again (decode_stats shows how often).
  // It bounds all decoded memory: each reader's decode scratch (a chunk's stored bytes and its
  // filters' intermediate outputs) is counted in it too, so more workers never hold more than
  // the budget plus one chunk and one chunk's scratch (decoded outside it, one at a time, when
  // every byte of it is in use). A chunk whose decoded size exceeds the budget is a
  // config_error naming file, dataset and this option.
  std::optional<std::size_t> decode_cache_bytes;
  // When shards are opened (an open keeps a descriptor and builds the shard's index):
  //   lazy (default)  the first shard at construction (it fixes layout, dtype, row shape and
  //                   labels); every other one when a record of it is first used (read, size,
  //                   label, decode unit), so a rank opens only the shards its records lie in.
  //                   Their record counts and largest records come from the `manifest.json`
  //                   gpufeed pack wrote beside the first shard when it lists every shard, else
  //                   from a header read per shard (closed again); so do decode units of
  //                   uncompressed and fixed-layout shards (the manifest's band_rows), without
  //                   opening. A bad shard's error (typed, naming it) comes from the call that
  //                   first uses it.
  //   eager           every shard at construction: every open error there.
  enum class open_kind { lazy, eager };
  open_kind open = open_kind::lazy;
  // 2-byte floating-point data (float16) has no native C type, so H5Dread's native memory type
  // for it is float32: that is what records hold by default (4 bytes an element, through the
  // H5Dread fallback). true delivers the stored 2-byte elements as they are (in native byte
  // order), on the pread paths; `gpufeed pack --from` reads so to keep float16 float16.
  bool keep_float16 = false;
  // The most shards that hold open descriptors at once (one each; two for a shard read through
  // the H5Dread fallback), so any number of shards reads under a descriptor limit such as
  // `ulimit -n` 1024. Past it the least recently used shard not being read is closed; it
  // reopens on its next read, keeping its index (reopening costs an open(2), no HDF5 call, on
  // the pread paths). A shard being read is never closed: the bound may be exceeded by one shard
  // per reading thread. 0: no bound (every opened shard stays open).
  std::size_t max_open_shards = 256;
  // How gpufeed reads a shard's bytes itself (the H5Dread fallback reads through HDF5 either way):
  //   automatic (default)  through a read-only memory map for shards whose records need no
  //                        decoding (contiguous data, chunks without filters): a record is then a
  //                        copy out of the page cache, not a system call; pread(2) for shards of
  //                        compressed chunks, read a chunk (a MiB or so) at a time, where a map
  //                        saves nothing; pread(2) for all in ThreadSanitizer builds, where
  //                        the SIGBUS guard below cannot work
  //   pread                pread(2) for every shard
  //   map                  the memory map for every shard
  // A file truncated while mapped is an io_error naming file and record, never SIGBUS or zeros
  // (detail/io/mapped_file.hpp). hdf5_shard_info::mapped says what a shard uses.
  enum class read_method { automatic, pread, map };
  read_method reads = read_method::automatic;
  // A node-local disk cache of the bytes of shards named by URLs (docs/design.md "A node-local
  // cache of remote shards"): blocks of block_bytes, least recently used evicted past max_bytes,
  // checksummed, shared by every process of the node that names the same directory. Unset
  // directory: GPUFEED_REMOTE_CACHE_DIR and GPUFEED_REMOTE_CACHE_BYTES ("64G") when set, else
  // no cache. A directory without a budget is a config_error.
  struct remote_cache_options {
    std::filesystem::path directory;
    std::uint64_t max_bytes = 0;
    std::size_t block_bytes = std::size_t{4} << 20;  // a power of two, 64 KiB to 8 MiB
  };
  remote_cache_options remote_cache;
};

enum class hdf5_read_path { pread_raw, pread_decode, h5dread_fallback };

inline std::string to_string(hdf5_read_path p) {
  switch (p) {
    case hdf5_read_path::pread_raw:
      return "pread_raw";
    case hdf5_read_path::pread_decode:
      return "pread_decode";
    case hdf5_read_path::h5dread_fallback:
      return "h5dread_fallback";
  }
  return "unknown";
}

// What opening one shard learned, as hdf5_source::shards() reports it.
struct hdf5_shard_info {
  std::filesystem::path path;
  std::uint64_t first_record = 0, records = 0;  // place in the global record space
  std::string layout;                           // "fixed" or "blob"
  std::string dtype;                 // "uint8", "int16", "float32", ... (+ " big-endian")
  std::vector<std::uint64_t> shape;  // of the data dataset
  std::string storage;               // "contiguous", "chunked", "compact", "virtual", "external"
  std::vector<std::uint64_t> chunk_shape;  // empty unless chunked
  std::vector<std::string> filters;  // "deflate(level)", "shuffle", "fletcher32", "lz4", "zstd",
                                     // "blosc", "bitshuffle[(lz4|zstd)]", other names
  // Named read_path, not path: `path` is the file.
  hdf5_read_path read_path = hdf5_read_path::pread_raw;
  std::string fallback_reason;   // why h5dread_fallback, else empty
  bool mapped = false;           // read through a memory map (hdf5_options::reads)
  std::uint64_t data_bytes = 0;  // decoded bytes of all records in this shard
  std::string label_dataset;     // the label dataset read from this shard, empty when none
  bool opened = true;  // false: not opened yet (lazy): only path, place and records are known
};

}  // namespace gpufeed
