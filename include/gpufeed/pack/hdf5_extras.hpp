// gpufeed — what pack stores beside an HDF5 shard's records, read back. Needs only the hdf5
// component (and works on any HDF5 shard: one pack did not write has neither labels nor names).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "gpufeed/pack/detail/hdf5_extras.hpp"

namespace gpufeed {

// What pack stores beside an HDF5 shard's records: whether the shard has a `labels` dataset (hdf5_source
// reads it by default) and its record names (names/, read only
// when read_names). Shards pack did not write have neither. format_error when `shard` is not
// HDF5; errors of reading names/ propagate as hdf5_source reports them.
struct hdf5_shard_extras {
  bool has_labels = false, has_names = false;
  std::vector<std::string> names;
};

inline hdf5_shard_extras read_hdf5_extras(const std::filesystem::path& shard,
                                          bool read_names = true) {
  const auto present = detail::pack::hdf5_links_exist(shard, {"labels", "names/data"});
  hdf5_shard_extras x;
  x.has_labels = present[0];
  x.has_names = present[1];
  if (x.has_names && read_names) x.names = detail::pack::read_names(shard);
  return x;
}

}  // namespace gpufeed
