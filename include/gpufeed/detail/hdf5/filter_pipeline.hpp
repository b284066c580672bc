// gpufeed — a chunked dataset's filter pipeline read into filter_steps (shard_index::pipeline)
// and the description's filter names, each filter known by its id in the codec registry
// (detail/codec/registry.hpp). Part of the storage index (chunk_index.hpp).
#pragma once

#include <hdf5.h>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "gpufeed/detail/codec/registry.hpp"
#include "gpufeed/detail/hdf5/chunk_decoders.hpp"
#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/detail/hdf5/shard.hpp"

namespace gpufeed::detail::hdf5 {

// The registry's rows for HDF5's own filters are HDF5's ids.
static_assert(codec::filter_id(codec::kind::none) == H5Z_FILTER_NONE);
static_assert(codec::filter_id(codec::kind::deflate) == H5Z_FILTER_DEFLATE);
static_assert(codec::filter_id(codec::kind::shuffle) == H5Z_FILTER_SHUFFLE);
static_assert(codec::filter_id(codec::kind::fletcher32) == H5Z_FILTER_FLETCHER32);
static_assert(std::string_view(codec::filter_row(H5Z_FILTER_SZIP)->name) == "szip");
static_assert(std::string_view(codec::filter_row(H5Z_FILTER_NBIT)->name) == "nbit");
static_assert(std::string_view(codec::filter_row(H5Z_FILTER_SCALEOFFSET)->name) == "scaleoffset");

// Bitshuffle's cd_values, refused before any chunk reaches the plugin, which crashes on them (a
// zero element size divides by zero; an unknown compression code is read as uncompressed).
inline void check_bitshuffle_values(const unsigned* cd, std::size_t ncd, const std::string& file) {
  if (ncd < 3 || cd[2] == 0 ||
      (ncd >= 5 && cd[4] != codec::bitshuffle_mode::none && cd[4] != codec::bitshuffle_mode::lz4 &&
       cd[4] != codec::bitshuffle_mode::zstd))
    format_fail("dataset's Bitshuffle filter parameters are not valid (" +
                    (ncd < 3 ? std::to_string(ncd) + " parameters"
                     : cd[2] == 0
                         ? std::string("element size 0")
                         : "compression code " + std::to_string(cd[4]) +
                               "; known: 0 none, 2 LZ4, 3 Zstd") +
                    "): damaged or crafted",
                file);
}

// Reads the filter pipeline into s.description.filters and s.pipeline. Returns the reason the
// shard must fall back, or "" when gpufeed decodes every filter.
inline std::string read_pipeline(shard_index& s, hid_t dcpl, const std::string& file) {
  const int n = check(H5Pget_nfilters(dcpl), "H5Pget_nfilters", "cannot read filters", file);
  std::string reason;
  int compressors = 0;
  for (int k = 0; k < n; ++k) {
    unsigned flags = 0, config = 0;
    std::array<unsigned, 16> cd{};
    std::size_t ncd = cd.size();
    std::array<char, 128> name{};
    const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(k), &flags, &ncd, cd.data(),
                                           name.size(), name.data(), &config);
    if (id < 0) throw_hdf5("cannot read filter " + std::to_string(k), file, "H5Pget_filter2");
    name.back() = '\0';
    filter_step step;
    step.kind = codec::kind_of_filter(id);
    const std::string known = codec::name_of(step.kind);
    switch (step.kind) {
      case codec::kind::deflate:
        s.description.filters.push_back(known + "(" + (ncd ? std::to_string(cd[0]) : "?") + ")");
        break;
      case codec::kind::shuffle:
        s.description.filters.push_back(known);
        step.element_size = ncd ? cd[0] : s.element_size;
        break;
      case codec::kind::fletcher32:
      case codec::kind::lz4:
      case codec::kind::zstd:
      case codec::kind::blosc:
        s.description.filters.push_back(known);
        break;
      case codec::kind::bitshuffle:
        check_bitshuffle_values(cd.data(), ncd, file);
        step.element_size = cd[2];
        step.block = ncd > 3 ? cd[3] : 0;
        step.compression = ncd > 4 ? cd[4] : codec::bitshuffle_mode::none;
        s.description.filters.push_back(codec::bitshuffle_name(step.compression));
        break;
      case codec::kind::none:
      case codec::kind::other: {
        // HDF5's name for it, or the registry's for HDF5's own filters gpufeed leaves to HDF5.
        std::string nm =
            name[0] ? std::string(name.data()) : "unknown(" + std::to_string(id) + ")";
        const codec::identity* row = codec::filter_row(id);
        if (row && row->kind == codec::kind::other) nm = row->name;
        s.description.filters.push_back(nm);
        // Not available to HDF5 either (plugin missing): H5Dread still works for chunks that
        // skipped it (optional filters), and fails with a library_error for the others.
        const bool available = H5Zfilter_avail(id) > 0;
        take_error_stack();
        if (reason.empty())
          reason = "filter '" + nm + "' is decoded by HDF5, not by gpufeed" +
                   (available ? "" : " (and this HDF5 library does not have it: plugin missing?)");
        step.kind = codec::kind::other;
        s.pipeline.push_back(step);
        continue;
      }
    }
    if (compresses(step)) ++compressors;
    s.pipeline.push_back(step);
  }
  // A second compressor's output size is the first one's stored size, which no header records.
  if (reason.empty() && compressors > 1)
    reason = "more than one compressing filter: decoded by HDF5, not by gpufeed";
  if (reason.empty() && n > 32) reason = "more than 32 filters";
  return reason;
}

}  // namespace gpufeed::detail::hdf5
