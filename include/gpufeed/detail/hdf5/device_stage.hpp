// gpufeed — one record of an HDF5 shard staged for decoding on the device (docs/design.md, "GPU
// decode in the loader"): instead of decoding its chunks, the worker makes sure each band of
// chunks the record touches is in the device cache (decoded there by this batch or an earlier
// one, unit_directory.hpp), reading the compressed bytes of the bands it must stage into the
// batch's pinned work area and planning their units (gpu_chunk_plan.hpp), and lists the runs
// that gather the record from the cache into its place in the batch.
//
// A record it cannot stage (a shard that is not compressed, or byte-swapped; a pipeline or chunk
// the kernels do not take; bytes that cannot be read; no room in the cache or in the batch's
// work area) is left to the host path: stage_record returns false and the caller reads it as
// before. Errors are never raised here: the host read reports them in the CPU path's words.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "gpufeed/detail/device_decode/batch_work.hpp"
#include "gpufeed/detail/device_decode/unit_directory.hpp"
#include "gpufeed/detail/hdf5/gpu_chunk_plan.hpp"
#include "gpufeed/detail/hdf5/record_plan.hpp"
#include "gpufeed/detail/hdf5/shard.hpp"

namespace gpufeed::detail::hdf5 {

// The chunks of one band (the chunks covering the same rows; in a blob shard, one chunk).
inline std::uint64_t band_chunks_of(const shard_index& s) noexcept {
  return s.grid.grid[0] ? s.grid.chunk_count / s.grid.grid[0] : 0;
}

// Device cache bytes one band of s takes: its decoded chunks, then a stage for each chunk (the
// staged kinds inflate there before they unshuffle, gpu_units.hpp), 256-byte aligned.
inline std::uint64_t device_place_bytes(const shard_index& s) noexcept {
  const std::uint64_t n = band_chunks_of(s), c = s.grid.chunk_bytes;
  return (n * (2 * c + 4) + 255) / 256 * 256;
}

// Whether the kernels decode chunks written with `pipeline` (every filter active): the
// pipelines gpu_chunk_plan.hpp lists. A chunk whose mask skips filters is planned on its own.
inline bool device_pipeline(std::span<const filter_step> pipeline) noexcept {
  using codec::kind;
  std::size_t n = pipeline.size();
  if (n > 0 && pipeline[n - 1].kind == kind::fletcher32) --n;  // checked beside the data
  auto is = [&](std::size_t i, kind k) { return pipeline[i].kind == k; };
  if (n == 0) return true;
  if (n == 1)
    return is(0, kind::shuffle) || is(0, kind::lz4) || is(0, kind::deflate) ||
           (is(0, kind::bitshuffle) &&
            (pipeline[0].compression == codec::bitshuffle_mode::none ||
             pipeline[0].compression == codec::bitshuffle_mode::lz4));
  if (n == 2 && is(0, kind::shuffle) && is(1, kind::deflate)) return true;
  return (n == 2 || n == 3) && is(0, kind::fletcher32) && is(n - 1, kind::deflate) &&
         (n == 2 || is(1, kind::shuffle));
}

// Whether s's records can be decoded on the device at all: compressed chunks the kernels
// decode, in the host's byte order, whose rows the shard's row plan describes (fixed layout) or
// blob records.
inline bool device_decodable(const shard_index& s) noexcept {
  return s.kind == read_kind::chunked && !s.pipeline.empty() && device_pipeline(s.pipeline) &&
         !s.swap && s.grid.chunk_bytes > 0 && band_chunks_of(s) > 0 &&
         (s.blob || s.rows.usable());
}

// The device units of a source whose shards are chunked like its first, s (`shards` of them).
inline device_decode::device_units device_units_of(const shard_index& s, std::size_t shards) {
  device_decode::device_units u;
  if (!device_decodable(s)) return u;
  const std::uint64_t per_band = band_chunks_of(s);
  u.place_bytes = device_place_bytes(s);
  for (std::uint64_t b = 0; b < s.grid.grid[0]; ++b) {
    std::uint64_t stored = 0;
    for (std::uint64_t j = 0; j < per_band; ++j)
      stored += s.chunks[static_cast<std::size_t>(b * per_band + j)].size;
    u.stored_bytes = std::max(u.stored_bytes, stored);
  }
  u.unit_records = s.blob ? std::max<std::uint64_t>(1, s.records / s.grid.grid[0])
                          : s.grid.chunk[0];
  u.units = s.grid.grid[0] * shards;
  u.record_runs = s.blob ? s.chunks_per_record : s.rows.plan.runs.size();
  return u;
}

class device_stager {
 public:
  // Stages record `local` of s (shard `shard`, its chunks numbered from `key_base` in the
  // source) for batch work `w`, its bytes going to `dst` in the batch's data. False: read it on
  // the host.
  bool stage_record(const shard_index& s, std::size_t shard, std::uint64_t key_base,
                    std::uint64_t local, std::uint64_t dst, device_decode::batch_work& w,
                    device_decode::unit_directory& dir) {
    if (!device_decodable(s) || device_place_bytes(s) > dir.place_bytes()) return false;
    std::uint64_t base = 0;
    const record_plan* plan = &plan_of(s, local, base);
    const std::size_t shift =
        s.blob ? 0 : static_cast<std::size_t>(local % s.rows.band_rows) * s.rows.row_stride;
    const std::uint64_t per_band = band_chunks_of(s);
    // The bands the record touches, in plan order (consecutive chunks share a band).
    bands_.clear();
    for (std::size_t i = 0; i < plan->chunks(); ++i) {
      const std::uint64_t band = (base + plan->chunk[i]) / per_band;
      if (bands_.empty() || bands_.back().band != band) bands_.push_back(band_place{band, 0});
    }
    for (band_place& b : bands_) {
      // The band the last record of this batch took (rows of one band follow each other in
      // sequential order and block_shuffled's sorted tasks): pinned for the batch already.
      const std::uint64_t key = key_base + b.band;
      if (last_work_ == &w && last_batch_ == w.batch() && last_key_ == key) {
        b.offset = last_offset_;
        continue;
      }
      const device_decode::unit_directory::claim c = dir.acquire(key, w.batch(), w.pins());
      if (c.what == device_decode::unit_directory::answer::no_room) return false;
      if (c.what == device_decode::unit_directory::answer::stage) {
        if (!stage_band(s, b.band, c.offset, c.ref, w)) {
          dir.stage_failed(c.ref);
          return false;
        }
        dir.staged(c.ref);
        if (w.ahead() > 0) {
          // Bands enough for a launch of device_decode::launch_units (at the units this band
          // planned into), at most w.ahead() of them.
          const std::uint64_t per = std::max<std::size_t>(1, units_.size());
          const std::uint64_t more = std::min<std::uint64_t>(
              w.ahead(), (device_decode::launch_units + per - 1) / per - 1);
          const std::uint64_t last = std::min<std::uint64_t>(b.band + more, s.grid.grid[0] - 1);
          if (last > b.band) {
            w.publish_ahead({true, shard, key_base, b.band + 1, last});
            stage_ahead(s, key_base, b.band + 1, last, w, dir);
          }
        }
      }
      b.offset = c.offset;
      last_work_ = &w;
      last_batch_ = w.batch();
      last_key_ = key;
      last_offset_ = c.offset;
    }
    const std::size_t n = plan->runs.size();
    const std::optional<std::size_t> at = w.reserve_runs(n);
    if (!at) return false;
    device_decode::gather_run* out = w.runs() + *at;
    std::size_t b = 0;
    for (std::size_t i = 0; i < plan->chunks(); ++i) {
      const std::uint64_t k = base + plan->chunk[i];
      while (bands_[b].band != k / per_band) ++b;
      const std::uint64_t from = bands_[b].offset + (k % per_band) * s.grid.chunk_bytes + shift;
      for (std::size_t r = plan->first[i]; r < plan->first[i + 1]; ++r) {
        const record_run& run = plan->runs[r];
        *out++ = device_decode::gather_run{from + run.src, dst + run.dst, run.len};
      }
    }
    return true;
  }

  // Stages the bands records [local, local + count) of s touch that no place holds into batch
  // work `w`, ahead of their need (block_shuffled's next window: read_ahead.hpp).
  void stage_unit(const shard_index& s, std::uint64_t key_base, std::uint64_t local,
                  std::uint64_t count, device_decode::batch_work& w,
                  device_decode::unit_directory& dir) {
    if (!device_decodable(s) || device_place_bytes(s) > dir.place_bytes()) return;
    const std::uint64_t per_band = band_chunks_of(s);
    std::uint64_t last = ~std::uint64_t{0};
    for (std::uint64_t r = local; r < local + count; ++r) {
      // Rows of one band row read the same bands: the first of them stands for all.
      if (!s.blob && r > local && r % s.rows.band_rows != 0) continue;
      std::uint64_t base = 0;
      const record_plan& plan = plan_of(s, r, base);
      for (std::size_t i = 0; i < plan.chunks(); ++i) {
        const std::uint64_t band = (base + plan.chunk[i]) / per_band;
        if (band == last) continue;
        last = band;
        if (!stage_ahead(s, key_base, band, band, w, dir)) return;  // no room left
      }
    }
  }

  // Stages bands [first, last] of s that no place holds into batch work `w`: in sequential
  // order the batches after w's read them, and one launch then decodes all of them (a batch
  // alone touches a band or two, too few units to fill the device). The task that must stage a
  // band publishes the bands after it (work_capacity::ahead of them, ahead_span) and stages
  // them; the batch's other tasks call this too once their records are staged, and each band
  // goes to whichever claims it first. Stops at the first band that finds no place or no room
  // in the work area (false).
  bool stage_ahead(const shard_index& s, std::uint64_t key_base, std::uint64_t first,
                   std::uint64_t last, device_decode::batch_work& w,
                   device_decode::unit_directory& dir) {
    using answer = device_decode::unit_directory::answer;
    for (std::uint64_t a = first; a <= last; ++a) {
      const device_decode::unit_directory::claim c = dir.acquire_ahead(key_base + a, w.batch(),
                                                                       w.pins());
      if (c.what == answer::resident) continue;
      if (c.what == answer::no_room) return false;
      if (!stage_band(s, a, c.offset, c.ref, w)) {
        dir.stage_failed(c.ref);
        return false;
      }
      dir.staged(c.ref);
    }
    return true;
  }

 private:
  // The chunks record `local` of s reads (its plan), numbered from `base`, the first chunk of its
  // band row (0 in a blob shard, whose plan numbers them in the shard).
  const record_plan& plan_of(const shard_index& s, std::uint64_t local, std::uint64_t& base) {
    if (s.blob) {
      base = 0;
      own_plan_.build(s.grid, s.box(local));
      return own_plan_;
    }
    base = local / s.rows.band_rows * s.rows.band_chunks;
    return s.rows.plan;
  }

  struct band_place {
    std::uint64_t band;
    std::uint64_t offset;  // its place in the device cache
  };

  // Reads band b's stored chunks into the batch's work area and plans their units, decoding to
  // the place at `offset`. False when a chunk cannot be read or planned, or the work area is
  // full: nothing of the band is then decoded (its units are not listed).
  bool stage_band(const shard_index& s, std::uint64_t b, std::uint64_t offset,
                  device_decode::unit_ref ref, device_decode::batch_work& w) {
    const std::uint64_t per_band = band_chunks_of(s), c = s.grid.chunk_bytes;
    units_.clear();
    try {
      for (std::uint64_t j = 0; j < per_band; ++j) {
        const chunk_entry& e = s.chunks[static_cast<std::size_t>(b * per_band + j)];
        const std::optional<std::size_t> at = w.reserve_bytes(static_cast<std::size_t>(e.size));
        if (!at || e.size > s.file.size()) return false;
        std::byte* stored = w.bytes() + *at;
        s.file.read_exact(stored, static_cast<std::size_t>(e.size), e.address, 0);
        const gpu_chunk_plan p = plan_gpu_chunk(
            s.pipeline, e.filter_mask, std::span<const std::byte>(stored, e.size), c, *at,
            offset + j * c, offset + per_band * c + j * (c + 4), units_);
        if (!p.status.ok) return false;
      }
    } catch (...) {  // the host read of the record reports it
      return false;
    }
    const std::optional<std::size_t> first = w.reserve_units(units_.size());
    if (!first) return false;
    std::copy(units_.begin(), units_.end(), w.units() + *first);
    w.add_staged(device_decode::staged_unit{ref, *first, units_.size()});
    return true;
  }

  record_plan own_plan_;
  std::vector<band_place> bands_;
  // The last band claimed: for work `last_work_` of batch `last_batch_`, key and place.
  const device_decode::batch_work* last_work_ = nullptr;
  std::uint64_t last_batch_ = 0, last_key_ = 0, last_offset_ = 0;
  std::vector<codec::gpu_unit> units_;
};

}  // namespace gpufeed::detail::hdf5
