// gpufeed — the HDF5 source's vocabulary: the options it opens shards with and what it reports
// about each shard. A leaf header (no HDF5, no detail/) so that both hdf5_source.hpp and the
// detail/hdf5 code that fills these types name them directly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace gpufeed {

struct hdf5_options {
  std::string dataset = "data";  // fixed-shape dataset: record = one row along dimension 0
  std::string label_dataset;     // optional 1-D integer dataset, one entry per record
  enum class layout_kind { automatic, fixed, blob };
  // automatic: blob when `dataset` is 1-D uint8 and an "offsets" dataset sits beside it
  // (record i = data[offsets[i] .. offsets[i+1])); otherwise fixed.
  layout_kind layout = layout_kind::automatic;
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
  std::uint64_t data_bytes = 0;  // decoded bytes of all records in this shard
};

}  // namespace gpufeed
