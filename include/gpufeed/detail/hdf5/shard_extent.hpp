// gpufeed::detail::hdf5 — what a source must know about a shard before opening it: its record
// count (to build the record space) and its largest record (to size the loader's slots for the
// blob layout), and where pack's manifest says it, its decode band height. From `gpufeed pack`'s
// manifest when one beside the shards lists them all (detail/pack_manifest.hpp), else from a
// header read that closes the file again (no descriptor kept, no chunk index, no labels). A shard
// named by a URL is read as open_shard reads it: HDF5 through gpufeed's driver over the object's
// ranged reads, its metadata through a block_cache.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/detail/hdf5/index_driver.hpp"
#include "gpufeed/detail/hdf5/open_shard.hpp"
#include "gpufeed/detail/hdf5/url_reader.hpp"
#include "gpufeed/detail/io/block_cache.hpp"
#include "gpufeed/detail/pack_manifest.hpp"
#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

struct shard_extent {
  std::uint64_t records = 0;
  std::uint64_t max_record = 0;  // bytes; 0 when unknown
  // Rows per decode band (pack's manifest, detail/pack_manifest.hpp): 0 when records decode
  // alone, absent when unknown until the shard is opened.
  std::optional<std::uint64_t> band_rows;
};

// A header read: the data dataset's extent (and for the blob layout the offsets, for the
// largest record), then the file is closed. Errors are those of open_shard for the same faults.
inline shard_extent read_extent(const std::filesystem::path& p, const std::string& dataset,
                                bool blob, std::uint64_t row_bytes) {
  const bool url = is_shard_url(p);
  const io::owned_source src = url ? open_url_reader(p.native(), hdf5_options{})
                                   : io::owned_source(std::make_unique<io::posix_file>(p));
  std::optional<io::block_cache> meta;  // declared before HDF5's handles: outlives them
  if (url) meta.emplace(src.source());
  const io::byte_source& f = meta ? *meta : src.source();
  const std::string& file = f.name();
  library_lock lock;
  if (url ? !has_hdf5_signature(f) : H5Fis_hdf5(file.c_str()) <= 0) {
    take_error_stack();
    format_fail("not an HDF5 file", file);
  }
  handle fapl;
  if (url) {
    fapl = checked(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate", "no fapl", file);
    check(H5Pset_driver(fapl.get(), index_driver::id(), nullptr), "H5Pset_driver",
          "cannot set the driver", file);
  }
  const hid_t fid_raw = [&] {
    const source_scope armed(url ? driver_sources{&*meta, &src.source()} : driver_sources{});
    return H5Fopen(file.c_str(), H5F_ACC_RDONLY, url ? fapl.get() : H5P_DEFAULT);
  }();
  handle fid = checked<format_error>(fid_raw, H5Fclose, "H5Fopen",
                                     "cannot open the HDF5 file (truncated or damaged?)", file);
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
