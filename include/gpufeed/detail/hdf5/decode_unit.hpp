// gpufeed — the decode unit of an hdf5_source's record (hdf5_source::decode_unit): records that
// decode together share one, so a loader's planner can keep them on one worker.
//
// Bit layout of a unit:
//   top bit set     the record lies in a band of compressed chunks: the remaining bits are the
//                   shard's key base (shard k << shard_key_bits, source_state.hpp) plus the
//                   band's index in the shard (the record's first element along dimension 0,
//                   row for fixed or byte for blob, over the chunk's extent there).
//                   A contiguous shard named by a URL has bands too: the records of one remote
//                   unit (shard_index::remote_band), fetched together (remote_units.hpp).
//   top bit clear   the record decodes alone (uncompressed shard, or a shard that cannot be
//                   opened): the unit is the record's own index.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/detail/hdf5/source_state.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

inline constexpr std::uint64_t band_unit_bit = std::uint64_t{1} << 63;

// The decode unit of record i (config_error when out of range). Never throws the record's
// shard's open error: a shard that cannot be opened gives the record's own index. An unopened
// shard whose band height pack's manifest states (fixed layout, or uncompressed) is answered
// from it without opening; a compressed blob shard is opened (its offsets place the record).
inline std::uint64_t decode_unit_of(const source_state& st, std::uint64_t i) {
  const std::size_t k = st.locate(i);
  const std::uint64_t local = i - st.first(k);
  const auto& sl = st.space.at(k);
  const shard_index* opened = sl.opened.if_open();
  if (!opened && sl.expected.band_rows && (*sl.expected.band_rows == 0 || !st.blob())) {
    const std::uint64_t rows = *sl.expected.band_rows;
    return rows == 0 ? i : band_unit_bit | (st.key_base[k] + local / rows);
  }
  if (!opened) {
    try {
      opened = &st.shard(k);
    } catch (const error&) {
      return i;
    }
  }
  const auto& s = *opened;
  if (s.remote_band)
    return band_unit_bit | (st.key_base[k] + (s.blob ? s.offsets[local] : local) / s.remote_band);
  if (s.kind != read_kind::chunked || s.pipeline.empty()) return i;
  // The band holding the record's first element: its row (fixed) or byte (blob) along
  // dimension 0 over the chunk's extent there.
  return band_unit_bit | (st.key_base[k] + (s.blob ? s.offsets[local] : local) / s.grid.chunk[0]);
}

}  // namespace gpufeed::detail::hdf5
