// gpufeed::detail::codec — every HDF5 filter gpufeed knows, in one table: filter id <-> kind <->
// name. HDF5 reading (the filter pipeline, the dataset listing, the GPU plan's messages) and
// pack's HDF5 writer read ids and names from here, never from literals of their own.
//
// Each codec has one home, detail/codec/<name>.hpp: its identity (kind, HDF5 filter id, name),
// its CPU decoder, its CPU encoder where gpufeed pack writes it, and a line naming its GPU decoder
// under cuda/detail/codec/ where one exists. The rows here are those identities; HDF5's own
// filters that are not codecs (shuffle, fletcher32: detail/hdf5/filters.hpp) and those gpufeed
// leaves to HDF5 (szip, nbit, scaleoffset: named in messages, kind `other`) are written here.
//
// Adding a codec:
//   1. kind.hpp: a value in `kind` (before `other`).
//   2. detail/codec/<name>.hpp: `inline constexpr identity <name>_codec{kind::<name>, id, "name"}`,
//      the decoder (returns a codec::result), the encoder if pack writes it (throws through
//      encode_fail), and the GPU decoder line.
//   3. Here: include the file and add its row to `filters`.
//   4. Dispatch, where the codec is used: detail/hdf5/chunk_decoders.hpp (decode, compresses()),
//      detail/hdf5/filter_pipeline.hpp (its case, and its cd_values if it has any),
//      detail/hdf5/fallback_check.hpp's outer_size (how its header records the decoded size),
//      detail/hdf5/gpu_chunk_plan.hpp if it has a GPU decoder; for pack, pack/pack_codec.hpp (a
//      pack_codec value and its --compress name), pack/detail/codecs.hpp (kind_of,
//      encode_chunk) and pack/detail/hdf5_writer.hpp (set_filter's cd_values). -Wswitch names
//      filter_pipeline.hpp's switch and kind_of when they miss a value.
//   5. Tests: tests/hdf5/test_codec_registry.cpp checks the table; fixtures in
//      tests/hdf5/make_codec_fixtures.py and test_hdf5_codecs.cpp, pack in test_pack_codecs.cpp.
// The registry needs the codec libraries (the hdf5 component) because the codec files do; the
// enum alone (kind.hpp) needs none.
#pragma once

#include <string_view>

#include "gpufeed/detail/codec/bitshuffle.hpp"
#include "gpufeed/detail/codec/blosc.hpp"
#include "gpufeed/detail/codec/deflate.hpp"
#include "gpufeed/detail/codec/kind.hpp"
#include "gpufeed/detail/codec/lz4.hpp"
#include "gpufeed/detail/codec/zstd.hpp"

namespace gpufeed::detail::codec {

// One row per filter id; one row per kind except `other`, which several ids name.
inline constexpr identity filters[] = {
    {kind::none, 0, "none"},              // H5Z_FILTER_NONE
    deflate_codec,                        // 1
    {kind::shuffle, 2, "shuffle"},        // H5Z_FILTER_SHUFFLE
    {kind::fletcher32, 3, "fletcher32"},  // H5Z_FILTER_FLETCHER32
    {kind::other, 4, "szip"},             // H5Z_FILTER_SZIP
    {kind::other, 5, "nbit"},             // H5Z_FILTER_NBIT
    {kind::other, 6, "scaleoffset"},      // H5Z_FILTER_SCALEOFFSET
    blosc_codec,                          // 32001
    lz4_codec,                            // 32004
    bitshuffle_codec,                     // 32008
    zstd_codec,                           // 32015
};

// Every id once; every kind but `other` once.
constexpr bool filters_are_unique() noexcept {
  for (const identity& a : filters)
    for (const identity& b : filters)
      if (&a != &b &&
          (a.filter_id == b.filter_id || (a.kind == b.kind && a.kind != kind::other)))
        return false;
  return true;
}
static_assert(filters_are_unique(), "a filter id or kind listed twice in codec::filters");

// The row of filter id `id`, or nullptr for an id not in the table.
constexpr const identity* filter_row(int id) noexcept {
  for (const identity& f : filters)
    if (f.filter_id == id) return &f;
  return nullptr;
}

// The kind of filter id `id`: `other` for an id gpufeed does not decode.
constexpr kind kind_of_filter(int id) noexcept {
  const identity* f = filter_row(id);
  return f ? f->kind : kind::other;
}

// The row of kind k (not `other`, which has none: an empty identity of kind `other`).
constexpr identity identity_of(kind k) noexcept {
  if (k != kind::other)
    for (const identity& f : filters)
      if (f.kind == k) return f;
  return identity{kind::other, -1, "other"};
}

// The HDF5 filter id of kind k; -1 (H5Z_FILTER_ERROR) for `other`.
constexpr int filter_id(kind k) noexcept { return identity_of(k).filter_id; }

// The name of kind k ("other" for `other`).
constexpr const char* name_of(kind k) noexcept { return identity_of(k).name; }

// The kind named `name` (a name_of), `other` for any other name.
constexpr kind kind_named(std::string_view name) noexcept {
  for (const identity& f : filters)
    if (f.kind != kind::other && name == f.name) return f.kind;
  return kind::other;
}

}  // namespace gpufeed::detail::codec
