// gpufeed — checking packed shards by reading them back through gpufeed's own sources (part of
// gpufeed/pack/pack.hpp): what a loader will deliver is exactly what was packed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/thread_group.hpp"
#include "gpufeed/pack/detail/formats.hpp"
#include "gpufeed/pack/detail/reading.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail::pack {

// What one record of a shard holds, as its source delivers it.
struct read_back {
  std::vector<std::uint64_t> sizes;
  std::vector<std::uint32_t> crcs;
  std::vector<std::int64_t> labels;  // empty when the source has none
};

// Reads every record of `src` on `threads` threads (each a contiguous range, one reader each, so
// a deflate chunk is decoded once). Errors of the sources propagate; the lowest range's first.
template <class Source>
read_back read_all(const Source& src, std::size_t threads) {
  const std::uint64_t n = src.size();
  read_back out;
  out.sizes.resize(static_cast<std::size_t>(n));
  out.crcs.resize(static_cast<std::size_t>(n));
  const bool labelled = gpufeed::has_labels(src);
  if (labelled) out.labels.resize(static_cast<std::size_t>(n));
  const std::size_t t = static_cast<std::size_t>(
      std::clamp<std::uint64_t>(n / 64, 1, std::max<std::size_t>(threads, 1)));
  std::vector<std::exception_ptr> errors(t);
  auto run = [&](std::size_t part) {
    try {
      auto reader = gpufeed::make_reader(src);
      std::vector<std::byte> buf(std::max<std::size_t>(src.max_record_size(), 1));
      for (std::uint64_t i = n * part / t; i < n * (part + 1) / t; ++i) {
        const std::size_t sz = src.record_size(i);
        reader.read(i, std::span<std::byte>(buf.data(), sz));
        out.sizes[i] = sz;
        out.crcs[i] = crc32_of(buf.data(), sz);
        if (labelled) out.labels[i] = src.label(i);
      }
    } catch (...) {
      errors[part] = std::current_exception();
    }
  };
  {
    thread_group pool;
    for (std::size_t part = 1; part < t; ++part) pool.spawn([&run, part] { run(part); });
    run(0);
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

inline read_back read_shard(const std::filesystem::path& shard, bool lmdb, bool datum, bool labels,
                            std::size_t threads) {
#if defined(GPUFEED_PACK_LMDB)
  if (lmdb) {
    lmdb_options o;
    o.format = datum ? lmdb_options::value_format::datum : lmdb_options::value_format::raw;
    return read_all(lmdb_source(shard, o), threads);
  }
#endif
#if defined(GPUFEED_PACK_HDF5)
  if (!lmdb) {
    hdf5_options o;
    o.label_dataset = labels ? pack_label_dataset : "";
    o.keep_float16 = true;  // the stored bytes, as repack_hdf5 read them from its source
    return read_all(hdf5_source(shard, o), threads);
  }
#endif
  (void)datum;
  (void)labels;
  (void)threads;
  throw config_error(std::string("verify: this program has no ") + (lmdb ? "LMDB" : "HDF5") +
                         " reader (link gpufeed::pack_" + (lmdb ? "lmdb" : "hdf5") + ")",
                     file_context(shard.string()));
}

[[noreturn]] inline void verify_fail(const std::string& what, const std::filesystem::path& shard,
                                     std::optional<std::uint64_t> record = std::nullopt) {
  error_context c;
  c.file = shard.string();
  c.record = record;
  throw corrupt_error("verify: " + what, std::move(c));
}

}  // namespace gpufeed::detail::pack
