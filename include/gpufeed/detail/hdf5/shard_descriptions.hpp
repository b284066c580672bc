// gpufeed — what an hdf5_source tells of its shards (hdf5_shard_info): an opened shard's
// description as its open built it; an unopened one's path, place and record count only, known
// without opening it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/source_state.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/hdf5_options.hpp"

namespace gpufeed::detail::hdf5 {

// Shard k as known now; never opens it. config_error when k is out of range.
inline hdf5_shard_info describe_shard(const source_state& st, std::size_t k) {
  if (k >= st.shard_count())
    throw config_error("shard " + std::to_string(k) + " is out of range (the source has " +
                       std::to_string(st.shard_count()) + " shards)");
  if (st.is_open(k)) return st.shard(k).description;
  hdf5_shard_info d;
  d.path = st.shown[k];
  d.first_record = st.first(k);
  d.records = st.first(k + 1) - st.first(k);
  d.opened = false;
  return d;
}

// Every shard's description, in record order; opens the shards not opened yet (throwing the
// first open error).
inline std::vector<hdf5_shard_info> describe_all_shards(const source_state& st) {
  std::vector<hdf5_shard_info> v;
  for (std::size_t k = 0; k < st.shard_count(); ++k) v.push_back(st.shard(k).description);
  return v;
}

// True when any opened shard reads through H5Dread; opens nothing.
inline bool any_opened_fallback(const source_state& st) noexcept {
  for (std::size_t k = 0; k < st.shard_count(); ++k)
    if (st.is_open(k) && st.shard(k).description.read_path == hdf5_read_path::h5dread_fallback)
      return true;
  return false;
}

}  // namespace gpufeed::detail::hdf5
