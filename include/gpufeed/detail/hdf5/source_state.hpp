// gpufeed — the shared, immutable state of an hdf5_source: its opened shards in record order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/cache_budget.hpp"
#include "gpufeed/detail/hdf5/open_shard.hpp"
#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/detail/hdf5/shared_chunk_cache.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/hdf5_options.hpp"

namespace gpufeed::detail::hdf5 {

struct source_state {
  std::vector<shard_index> shards;
  std::vector<std::uint64_t> first;     // first global record of each shard; back() = total
  std::vector<std::uint64_t> key_base;  // first source-wide chunk number of each shard
  std::size_t fixed_record = 0;         // row bytes (fixed layout), 0 for blob
  std::size_t max_record = 0;
  bool labels = false;
  unit_geometry units;                         // of the chunked shards, for the cache budget
  bool explicit_budget = false;                // hdf5_options::decode_cache_bytes was set
  std::unique_ptr<shared_chunk_cache> cache;   // shared by every reader; its own lock

  [[nodiscard]] std::uint64_t size() const noexcept { return first.empty() ? 0 : first.back(); }

  [[noreturn]] void out_of_range(std::uint64_t i) const {
    error_context ctx;
    ctx.record = i;
    throw config_error("record index " + std::to_string(i) + " is out of range (the source has " +
                           std::to_string(size()) + " records)",
                       std::move(ctx));
  }

  // The shard holding global record i; config_error when i >= size().
  [[nodiscard]] std::size_t locate(std::uint64_t i) const {
    if (i >= size()) out_of_range(i);
    if (shards.size() == 1) return 0;
    const auto it = std::upper_bound(first.begin(), first.end() - 1, i);
    return static_cast<std::size_t>(it - first.begin()) - 1;
  }

  // Opens every shard; format_error when they disagree on layout, dtype or row shape;
  // config_error naming the (first) file when no shard holds a record.
  source_state(const std::vector<std::filesystem::path>& paths, const hdf5_options& req) {
    if (paths.empty()) throw config_error("hdf5_source: no shard paths given");
    shards.reserve(paths.size());
    first.push_back(0);
    key_base.push_back(0);
    for (const auto& p : paths) {
      shards.push_back(open_shard(p, req));
      const shard_index& s = shards.back();
      const shard_index& s0 = shards.front();
      const auto& d = s.description;
      const auto& d0 = s0.description;
      const bool same_rows =
          std::equal(d.shape.begin() + 1, d.shape.end(), d0.shape.begin() + 1, d0.shape.end());
      // Byte order may differ: records are delivered in native order either way.
      auto value_type = [](const std::string& t) { return t.substr(0, t.find(' ')); };
      if (d.layout != d0.layout || (!s.blob && (value_type(d.dtype) != value_type(d0.dtype) ||
                                                !same_rows || s.element_size != s0.element_size))) {
        throw format_error("shard does not match the first shard '" + s0.path + "' (" + d.layout +
                               " " + d.dtype + " vs " + d0.layout + " " + d0.dtype +
                               ", or a different row shape)",
                           file_context(s.path));
      }
      // Labels left unset are read where the shards hold pack's dataset: all of them or none.
      if (d.label_dataset != d0.label_dataset) {
        const bool here = !d.label_dataset.empty();
        throw format_error(std::string("shard ") + (here ? "has a '" : "has no '") +
                               pack_label_dataset + "' dataset and the first shard '" + s0.path +
                               "' " + (here ? "has none" : "has one") +
                               " (set hdf5_options::label_dataset = \"\" to read no labels)",
                           file_context(s.path));
      }
      shards.back().description.first_record = first.back();
      first.push_back(first.back() + s.records);
      key_base.push_back(key_base.back() + (s.kind == read_kind::chunked ? s.grid.chunk_count : 0));
      max_record = std::max(max_record, s.max_record);
    }
    if (size() == 0) {  // a loader would refuse it without knowing which files were empty
      const auto& d = shards.front().description;
      std::string shape;
      for (std::size_t k = 0; k < d.shape.size(); ++k)
        shape += (k ? ", " : "") + std::to_string(d.shape[k]);
      throw config_error("dataset '" + req.dataset + "' holds no records (shape (" + shape + ")" +
                             (shards.size() > 1 ? ", and so do the other " +
                                                      std::to_string(shards.size() - 1) + " shards"
                                                : std::string()) +
                             ")",
                         file_context(shards.front().path));
    }
    fixed_record = shards.front().blob ? 0 : shards.front().row_bytes;
    labels = !shards.front().description.label_dataset.empty();
    units = unit_geometry_of(shards);
    explicit_budget = req.decode_cache_bytes.has_value();
    cache = std::make_unique<shared_chunk_cache>(
        explicit_budget ? *req.decode_cache_bytes : automatic_cache_budget(units, read_plan{}));
  }
};

}  // namespace gpufeed::detail::hdf5
