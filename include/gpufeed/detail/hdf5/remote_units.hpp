// gpufeed — an HDF5 shard named by a URL, read in remote units: its data is cut into units of
// about remote::fetch_unit_bytes along dimension 0, which are both what its reader fetches with
// one ranged GET (remote/unit_reads.hpp) and its records' decode units (decode_unit.hpp), so
// block_shuffled permutes exactly those units and reads each within one window: one request
// per unit per epoch, read ahead of the window by will_need.
//   contiguous  whole rows (fixed layout) or bytes (blob) of about a unit each;
//   chunked     whole bands of chunks (one chunk index along dimension 0), as many as make about
//               a unit of stored bytes (a band of more than two units in several requests); a
//               unit spans its chunks in the file. Shards whose chunks do not lie in band order
//               with little between them (more than a quarter of a unit's span not its chunks)
//               keep one request per chunk: the decoded-chunk cache still reads each chunk once
//               per epoch in block_shuffled.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/detail/remote/unit_reads.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail::hdf5 {

// The units of chunked shard s: per_unit bands each (a decode unit), cut where a unit's chunks
// reach two fetch_unit_bytes (a larger band is fetched in several requests, all read in its
// window); empty when its chunks do not lie in band order or leave more than a quarter of a
// unit's span to other bytes.
inline std::vector<remote::unit_extent> chunk_units(const shard_index& s, std::uint64_t per_unit) {
  const std::uint64_t slab = s.grid.chunk_count / s.grid.grid[0];
  std::vector<remote::unit_extent> units;
  remote::unit_extent u{~std::uint64_t{0}, 0, 0};
  const auto close = [&] {
    if (u.need == 0) return true;
    if (4 * (u.end - u.begin - u.need) > u.end - u.begin) return false;
    if (!units.empty() && units.back().end > u.begin) return false;
    units.push_back(u);
    u = remote::unit_extent{~std::uint64_t{0}, 0, 0};
    return true;
  };
  for (std::uint64_t k = 0; k < s.grid.chunk_count; ++k) {
    if (k % (per_unit * slab) == 0 && !close()) return {};
    const chunk_entry& c = s.chunks[static_cast<std::size_t>(k)];
    if (c.size == 0) continue;
    u.begin = std::min(u.begin, c.address);
    u.end = std::max(u.end, c.address + c.size);
    u.need += c.size;
    if (u.need >= 2 * remote::fetch_unit_bytes && !close()) return {};
  }
  if (!close()) return {};
  return units;
}

// Gives shard s (opened, its reader a remote::unit_reads) its remote units; nothing for other
// readers, fallback shards and shards whose chunks do not allow them (chunk_units).
inline void fetch_in_units(shard_index& s) {
  if (!s.file.as<remote::unit_reads>() || s.records == 0) return;
  const std::uint64_t unit = remote::fetch_unit_bytes;
  std::vector<remote::unit_extent> units;
  std::uint64_t band = 0;
  if (s.kind == read_kind::contiguous) {
    band = s.blob ? unit : std::max<std::uint64_t>(1, unit / s.row_bytes);
    const std::uint64_t step = s.blob ? band : band * s.row_bytes;  // bytes of one unit
    const std::uint64_t end = s.base + (s.blob ? s.offsets.back() : s.records * s.row_bytes);
    for (std::uint64_t at = s.base; at < end; at += step) {
      const std::uint64_t to = std::min(end, at + step);
      units.push_back({at, to, to - at});
    }
  } else if (s.kind == read_kind::chunked && s.grid.grid[0] != 0) {
    std::uint64_t stored = 0;
    for (const chunk_entry& c : s.chunks) stored += c.size;
    const std::uint64_t band_stored = std::max<std::uint64_t>(1, stored / s.grid.grid[0]);
    const std::uint64_t per_unit = std::max<std::uint64_t>(1, unit / band_stored);
    units = chunk_units(s, per_unit);
    band = per_unit * s.grid.chunk[0];
  }
  if (units.empty()) return;
  std::unique_ptr<remote::unit_reads> r = s.file.take<remote::unit_reads>();
  r->set_units(std::move(units));
  s.file = io::owned_source(std::move(r));
  s.remote_band = band;
}

// How shard s's remote units are read (unit_mode); nothing for shards not read in units.
inline void set_unit_mode(const shard_index& s, remote::unit_mode m) noexcept {
  if (const auto* r = s.file.as<remote::unit_reads>()) r->mode(m);
}

// The unit_mode of a loader's plan: each_read in shuffled order, windows in block_shuffled,
// sequential otherwise.
inline remote::unit_mode unit_mode_of(const read_plan& p) noexcept {
  if (p.random_records) return remote::unit_mode::each_read;
  return p.window_records ? remote::unit_mode::windows : remote::unit_mode::sequential;
}

// Shard s's part of remote_stats (remote false for a local shard).
inline remote_stats remote_stats_of(const shard_index& s) {
  if (const auto* r = s.file.as<remote::unit_reads>()) return r->stats();
  return {};
}

// a += b, for remote_stats of several shards.
inline void add_to(remote_stats& a, const remote_stats& b) noexcept {
  a.remote = a.remote || b.remote;
  a.requests += b.requests;
  a.bytes_fetched += b.bytes_fetched;
  a.bytes_delivered += b.bytes_delivered;
  a.retries += b.retries;
  a.failures += b.failures;
  a.short_bodies += b.short_bodies;
  a.unit_fetches += b.unit_fetches;
  a.unit_prefetches += b.unit_prefetches;
  a.unit_hits += b.unit_hits;
  a.request_seconds += b.request_seconds;
  a.read_wait_seconds += b.read_wait_seconds;
  for (std::size_t k = 0; k < remote_latency_buckets; ++k) a.latency_us[k] += b.latency_us[k];
}

}  // namespace gpufeed::detail::hdf5
