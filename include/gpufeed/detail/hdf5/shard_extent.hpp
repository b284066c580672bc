// gpufeed::detail::hdf5 — what a source must know about a shard before opening it: its record
// count (to build the record space) and its largest record (to size the loader's slots for the
// blob layout). From `gpufeed pack`'s manifest when one beside the shards lists them all, else
// from a header read that closes the file again (no descriptor kept, no chunk index, no labels).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/detail/hdf5/open_shard.hpp"
#include "gpufeed/detail/posix_file.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

struct shard_extent {
  std::uint64_t records = 0;
  std::uint64_t max_record = 0;  // bytes; 0 when unknown
};

// The shards of a pack manifest ("manifest.json", as pack/detail/manifest.hpp writes it): file
// name -> records and max_record. Reads only that fixed shape (the library has no JSON
// dependency): nullopt when the file is absent or is not a gpufeed pack manifest.
inline std::optional<std::unordered_map<std::string, shard_extent>> read_manifest(
    const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string t = ss.str();
  if (t.find("\"kind\": \"gpufeed pack manifest\"") == std::string::npos) return std::nullopt;
  const auto number_after = [&](std::size_t from, std::size_t end, const char* key)
      -> std::optional<std::uint64_t> {
    const std::size_t k = t.find(key, from);
    if (k == std::string::npos || k > end) return std::nullopt;
    std::size_t i = k + std::char_traits<char>::length(key);
    std::uint64_t v = 0;
    bool any = false;
    while (i < end && t[i] >= '0' && t[i] <= '9') {
      v = v * 10 + static_cast<std::uint64_t>(t[i++] - '0');
      any = true;
    }
    return any ? std::optional<std::uint64_t>(v) : std::nullopt;
  };
  std::unordered_map<std::string, shard_extent> out;
  const std::size_t list = t.find("\"shards\": [");
  if (list == std::string::npos) return std::nullopt;
  const std::size_t list_end = t.find(']', list);
  for (std::size_t at = t.find("{\"file\": \"", list); at != std::string::npos && at < list_end;
       at = t.find("{\"file\": \"", at + 1)) {
    const std::size_t end = t.find('}', at);
    std::string name;
    std::size_t i = at + 10;
    for (; i < end && t[i] != '"'; ++i) {
      if (t[i] == '\\') return std::nullopt;  // pack's names need no escapes; be safe
      name += t[i];
    }
    const auto records = number_after(i, end, "\"records\": ");
    const auto max_record = number_after(i, end, "\"max_record\": ");
    if (!records || !max_record) return std::nullopt;  // an older manifest: no max_record
    out[name] = shard_extent{*records, *max_record};
  }
  return out;
}

// A header read: the data dataset's extent (and for the blob layout the offsets, for the
// largest record), then the file is closed. Errors are those of open_shard for the same faults.
inline shard_extent read_extent(const std::filesystem::path& p, const std::string& dataset,
                                bool blob, std::uint64_t row_bytes) {
  const posix_file f(p);
  const std::string& file = f.path();
  library_lock lock;
  if (H5Fis_hdf5(file.c_str()) <= 0) {
    take_error_stack();
    format_fail("not an HDF5 file", file);
  }
  handle fid = checked<format_error>(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose,
                                     "H5Fopen", "cannot open the HDF5 file (truncated or damaged?)",
                                     file);
  handle dset = open_dataset(fid.get(), f, dataset);
  const auto dims = dataset_dims(dset.get(), file, dataset);
  shard_extent e;
  if (!blob) {
    e.records = dims[0];
    e.max_record = row_bytes;
    return e;
  }
  const std::string name = sibling(dataset, "offsets");
  handle offs = open_dataset(fid.get(), f, name);
  const std::uint64_t n = check_1d_integer(offs.get(), file, name, true);
  if (n == 0) format_fail("dataset '" + name + "' is empty (it needs records + 1 entries)", file);
  const auto v = read_1d<std::uint64_t>(offs.get(), H5T_NATIVE_UINT64, n, file, name, f.size());
  e.records = n - 1;
  for (std::uint64_t k = 0; k + 1 < n; ++k)
    if (v[k + 1] >= v[k]) e.max_record = std::max(e.max_record, v[k + 1] - v[k]);
  return e;
}

}  // namespace gpufeed::detail::hdf5
