// gpufeed — the hot path: reading one record of an indexed shard with pread, decoding filtered
// chunks in the calling thread, through the source's shared cache of decoded chunks
// (detail/unit_cache/shared_chunk_cache.hpp).
//
// No HDF5 call happens here except for fallback shards. Bytes land in the caller's buffer
// directly when they can (contiguous data; an unfiltered chunk part that is one run; a chunk
// that is exactly one run of the record decodes straight into it); otherwise the chunk is
// decoded once into the shared cache and the record's runs are copied out, so all the records
// of one compressed chunk cost one decode, whichever worker reads them. A chunk is read and
// decoded by chunk_decoder.hpp; its cache key, group and readers come from chunk_keys.hpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/chunk_decoder.hpp"
#include "gpufeed/detail/hdf5/chunk_keys.hpp"
#include "gpufeed/detail/hdf5/filters.hpp"
#include "gpufeed/detail/hdf5/geometry.hpp"
#include "gpufeed/detail/hdf5/record_plan.hpp"
#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/detail/unit_cache/band_hold.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail::hdf5 {


class record_reader {
 public:
  explicit record_reader(unit_cache::shared_chunk_cache& cache)
      : decoder_(cache), hold_(cache), cache_(&cache) {}

  // Writes record `local` of shard s (global index `global`, for errors) to dst, which holds at
  // least s.record_bytes(local) bytes. `key_base` numbers s's chunks uniquely in the source.
  //
  // With wait = false it never waits for a chunk another reader is decoding: it does the rest of
  // the record (decoding the chunks nobody has started, copying out the ready ones) and returns
  // false, keeping the record's remaining chunks for finish_deferred(). Records whose chunks and
  // runs are worked out per record (blob records, scattered rows) always wait. True: complete.
  bool read(const shard_index& s, std::uint64_t key_base, std::uint64_t local, std::uint64_t global,
            std::span<std::byte> dst, bool wait = true) {
    const std::size_t n = s.record_bytes(local);
    switch (s.kind) {
      case read_kind::fallback:
        s.fallback_read(local, dst, global);
        return true;
      case read_kind::contiguous: {
        const std::uint64_t at = s.blob ? s.offsets[local] : local * s.row_bytes;
        if (n) s.file.read_exact(dst.data(), n, s.base + at, global);
        break;
      }
      case read_kind::chunked:
        if (!read_chunked(s, key_base, local, global, dst, wait)) return false;
        chunked_done(s, n, dst);
        return true;
    }
    if (s.swap) byteswap_elements(dst.data(), n, s.element_size);
    return true;
  }

  // Completes the oldest record read(wait = false) left unfinished, waiting for its chunks; the
  // caller names it (global index, dst as passed) and finishes them in the order they were left.
  // Errors as read(), for that record.
  void finish_deferred(std::uint64_t global, std::span<std::byte> dst) {
    if (next_late_ >= late_.size() || late_[next_late_].global != global ||
        late_[next_late_].dst.data() != dst.data())
      throw std::logic_error("record_reader::finish_deferred: not the oldest deferred record");
    const late_record r = late_[next_late_++];
    struct clear_when_done {  // the last one empties the lists, also when it throws
      record_reader& me;
      ~clear_when_done() {
        if (me.next_late_ == me.late_.size()) {
          me.late_.clear();
          me.late_places_.clear();
          me.next_late_ = 0;
        }
      }
    } done{*this};
    const shard_index& s = *r.s;
    if (r.whole) {
      (void)read(s, r.key_base, r.local, global, r.dst, true);
      return;
    }
    copy_waiting(s, s.rows.plan, r.key_base, r.base, r.shift,
                 std::span<const std::size_t>(late_places_).subspan(r.first, r.count), global,
                 r.dst);
    chunked_done(s, s.record_bytes(r.local), r.dst);
  }

  // Decodes into the shared cache the chunks of every band that local records [lo, hi) of s
  // touch, for reads to come (block_shuffled: the next window's units), while the cache has
  // room without evicting chunks still being read and still_ahead() says their reads have not
  // begun (shared_chunk_cache::decode_ahead). False: it stopped for one of those (the caller
  // decodes nothing further ahead now). Never throws: a chunk that fails to decode is left for
  // the read that needs it, which reports it.
  bool decode_ahead(const shard_index& s, std::uint64_t key_base, std::uint64_t lo,
                    std::uint64_t hi, const ahead_of_reads& still_ahead) noexcept {
    hi = std::min(hi, s.records);
    if (s.kind != read_kind::chunked || s.pipeline.empty() || lo >= hi) return true;
    const std::uint64_t first = s.blob ? s.offsets[lo] : lo;  // along dimension 0
    const std::uint64_t end = s.blob ? s.offsets[hi] : hi;
    if (end <= first || s.grid.grid[0] == 0) return true;
    const record_plan& rows = s.rows.plan;
    if (!s.blob && s.rows.usable() && rows.runs.size() == rows.chunks() &&
        rows.runs.front().len == s.grid.chunk_bytes)
      return true;  // each row is whole chunks, decoded straight into it: the cache never serves it
    const std::uint64_t band_chunks = s.grid.chunk_count / s.grid.grid[0];
    const std::uint64_t b0 = first / s.grid.chunk[0], b1 = (end - 1) / s.grid.chunk[0] + 1;
    try {
      for (std::uint64_t b = b0; b < b1; ++b)
        for (std::uint64_t k = b * band_chunks; k < (b + 1) * band_chunks; ++k) {
          const chunk_entry& c = s.chunks[static_cast<std::size_t>(k)];
          if (s.unfiltered(c)) continue;
          if (!cache_->decode_ahead(
                  chunk_group(s, key_base, k), key_base + k, s.grid.chunk_bytes,
                  chunk_users(s, b),
                  [&](std::span<std::byte> buf) { decoder_.decode(s, c, k, buf, 0); },
                  still_ahead))
            return false;  // no room, or the reads began: they decode the rest
        }
    } catch (...) {
    }
    return true;
  }

  // Frees the scratch buffers when they hold more than `keep` bytes (the shared cache stays).
  // Lets go of the band it holds pinned in any case.
  void release(std::size_t keep = 0) noexcept {
    hold_.drop();
    decoder_.release(keep);
  }

 private:
  // Copies chunk place i's runs of `plan` (shifted by `shift` bytes in the chunk) into dst.
  static void copy_runs(const record_plan& plan, std::size_t i, const std::byte* bytes,
                        std::size_t shift, std::span<std::byte> dst) noexcept {
    for (std::size_t r = plan.first[i]; r < plan.first[i + 1]; ++r) {
      const record_run& run = plan.runs[r];
      std::memcpy(dst.data() + run.dst, bytes + run.src + shift, run.len);
    }
  }

  // A chunked record's `n` bytes are in dst: counted, and byte-swapped where the file's order
  // is not the host's.
  void chunked_done(const shard_index& s, std::size_t n, std::span<std::byte> dst) noexcept {
    cache_->count_record(n);
    if (s.swap) byteswap_elements(dst.data(), n, s.element_size);
  }

  // Copies into dst, from the cache, the runs of the chunks at plan places `places` (chunk
  // numbers relative to `base`), waiting for those another reader is decoding.
  void copy_waiting(const shard_index& s, const record_plan& plan, std::uint64_t key_base,
                    std::uint64_t base, std::size_t shift, std::span<const std::size_t> places,
                    std::uint64_t global, std::span<std::byte> dst) {
    if (!places.empty()) decoder_.check_fits(s, global);
    for (const std::size_t i : places) {
      const std::uint64_t k = base + plan.chunk[i];
      const chunk_entry& c = s.chunks[static_cast<std::size_t>(k)];
      const unit_cache::pin held =
          cache_->get(chunk_group(s, key_base, k), key_base + k, s.grid.chunk_bytes,
                      chunk_users(s, k / s.rows.band_chunks),
                      [&](std::span<std::byte> buf) { decoder_.decode(s, c, k, buf, global); });
      copy_runs(plan, i, held.data(), shift, dst);
    }
  }

  // False (wait = false only): the record's chunks other readers were decoding are left in
  // late_ for finish_deferred().
  bool read_chunked(const shard_index& s, std::uint64_t key_base, std::uint64_t local,
                    std::uint64_t global, std::span<std::byte> dst, bool wait) {
    // The record's chunks and runs: the shard's row plan shifted to this row (fixed layout), or
    // worked out now (blob records, and rows too scattered for a plan).
    const record_plan* plan = &s.rows.plan;
    std::uint64_t base = 0;
    std::size_t shift = 0;
    if (!s.blob && s.rows.usable()) {
      base = local / s.rows.band_rows * s.rows.band_chunks;
      shift = static_cast<std::size_t>(local % s.rows.band_rows) * s.rows.row_stride;
    } else {
      own_plan_.build(s.grid, s.box(local));
      plan = &own_plan_;
    }
    const std::size_t n = plan->chunks();
    auto direct = [&](std::size_t i, const chunk_entry& c) {  // no copy through the cache
      const std::size_t runs = plan->first[i + 1] - plan->first[i];
      return runs == 1 && (s.unfiltered(c) || plan->runs[plan->first[i]].len == s.grid.chunk_bytes);
    };
    // A record spanning several chunks pins every ready one under one lock (and unpins them
    // under one), instead of two lock round trips per chunk: h5py's automatic chunks put one
    // 16 KiB row over 64 chunks. Rows of the band held from the last record take no lock at
    // all (band_hold.hpp) — also rows of one chunk (pack's shards: 64 rows a chunk), whose two
    // lock round trips per record left 14 workers waiting for the cache's lock a quarter of
    // their time in sequential order (docs/design.md, "HDF5 compressed chunks").
    deferred_.clear();
    const bool rows = plan == &s.rows.plan;
    const std::uint64_t band = key_base + base;
    // A row of the band the last deferred record waits for is deferred whole, without asking
    // the cache: its chunk is most likely still being decoded, and finish_deferred() reads the
    // band's deferred rows one after another, keeping the band pinned across them.
    if (!wait && rows && !late_.empty() && late_.back().s == &s &&
        late_.back().key_base + late_.back().base == band) {
      late_.push_back(late_record{&s, key_base, base, local, global, shift, dst, 0, 0, true});
      return false;
    }
    if (rows && hold_.holds(band)) {
      hold_.count_read();
    } else {
      hold_.drop();
      if (n > 1 || rows) {
        for (std::size_t i = 0; i < n; ++i) {
          const std::uint64_t k = base + plan->chunk[i];
          if (!direct(i, s.chunks[static_cast<std::size_t>(k)]))
            hold_.add(chunk_group(s, key_base, k), key_base + k);
        }
        hold_.pin(band);
      }
    }
    const std::vector<const std::byte*>& held_ = hold_.bytes();
    struct keep_or_drop {  // keeps a complete band of rows past this record, unless it threw
      unit_cache::band_hold& h;
      bool keep;
      ~keep_or_drop() {
        if (keep) h.keep_if_complete();
        else h.drop();
      }
    } finish{hold_, false};
    auto copy_out = [&](std::size_t i, const std::byte* bytes) {
      copy_runs(*plan, i, bytes, shift, dst);
    };
    auto users = [&](std::uint64_t k) { return chunk_users(s, k / s.rows.band_chunks); };
    std::size_t next_held = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t k = base + plan->chunk[i];
      const chunk_entry& c = s.chunks[static_cast<std::size_t>(k)];
      if (direct(i, c)) {
        const record_run& run = plan->runs[plan->first[i]];
        if (s.unfiltered(c)) {  // straight from the file into the record
          s.file.read_exact(dst.data() + run.dst, run.len, c.address + run.src + shift, global);
        } else {  // the record holds the whole chunk: decode into it
          decoder_.decode(s, c, k, dst.subspan(run.dst, run.len), global);
          cache_->count_direct_decode(run.len);
        }
        continue;
      }
      if (next_held < held_.size()) {
        if (const std::byte* bytes = held_[next_held++]) {
          copy_out(i, bytes);
          continue;
        }
      }
      // Another reader decoding this chunk: take the record's other chunks first, come back.
      decoder_.check_fits(s, global);
      const auto held =
          cache_->try_get(chunk_group(s, key_base, k), key_base + k, s.grid.chunk_bytes, users(k),
                          [&](std::span<std::byte> buf) { decoder_.decode(s, c, k, buf, global); });
      if (!held) {
        deferred_.push_back(i);
        continue;
      }
      copy_out(i, held->data());
    }
    finish.keep = rows;
    if (!wait && rows && !deferred_.empty()) {
      late_.push_back(late_record{&s, key_base, base, local, global, shift, dst,
                                  late_places_.size(), deferred_.size(), false});
      late_places_.insert(late_places_.end(), deferred_.begin(), deferred_.end());
      return false;
    }
    copy_waiting(s, *plan, key_base, base, shift, deferred_, global, dst);
    return true;
  }

  chunk_decoder decoder_;  // reads and decodes one chunk at a time, in its scratch
  // The chunks of the record's band pinned through pin_ready (null bytes: not ready then, read
  // through try_get / get), kept across rows of one band.
  unit_cache::band_hold hold_;
  std::vector<std::size_t> deferred_;      // one record's chunks (plan places) another reader
                                           // was decoding
  // Records read(wait = false) left unfinished, oldest first from next_late_; their chunk
  // places still to copy lie in late_places_[first, first + count) (whole: all of them).
  struct late_record {
    const shard_index* s;
    std::uint64_t key_base, base, local, global;
    std::size_t shift;
    std::span<std::byte> dst;
    std::size_t first, count;
    bool whole;  // nothing read yet: finish_deferred() reads the whole record
  };
  std::vector<late_record> late_;
  std::vector<std::size_t> late_places_;
  std::size_t next_late_ = 0;
  record_plan own_plan_;                   // a blob record's chunks and runs
  unit_cache::shared_chunk_cache* cache_;
};

}  // namespace gpufeed::detail::hdf5
