// gpufeed — one worker's reader of an hdf5_source's record space: locates each record's shard,
// keeps the shard it read last pinned (its descriptors open, detail/shard_lru.hpp), and hands
// the record to the shard's record_reader (record_reader.hpp). hdf5_source::reader is its public
// face. Not thread-safe; one per worker thread. Movable. It shares the source's state, so it may
// outlive the source object.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/detail/hdf5/adjacent_read.hpp"
#include "gpufeed/detail/hdf5/device_stage.hpp"
#include "gpufeed/detail/hdf5/record_plan.hpp"
#include "gpufeed/detail/hdf5/record_reader.hpp"
#include "gpufeed/detail/hdf5/source_state.hpp"
#include "gpufeed/detail/io/mapped_file.hpp"
#include "gpufeed/detail/shard_lru.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail::hdf5 {

class source_reader {
 public:
  explicit source_reader(std::shared_ptr<const source_state> state)
      : state_(std::move(state)), impl_(*state_->cache) {}

  // Writes record i to dst; with wait = false leaves the chunks another reader is decoding to
  // finish_deferred() and returns false (record_reader::read). config_error when i is out of
  // range or dst is smaller than the record.
  bool read(std::uint64_t i, std::span<std::byte> dst, bool wait) {
    const std::size_t k = state_->locate(i);
    // Another shard: let go of the last one first, so that opening this one may close it.
    if (!held_.holds(k)) held_.release();
    const auto& s = state_->shard(k);
    const std::uint64_t local = i - state_->first(k);
    const std::size_t need = s.record_bytes(local);
    if (dst.size() < need) {
      error_context ctx;
      ctx.file = s.path;
      ctx.record = i;
      throw config_error("destination holds " + std::to_string(dst.size()) + " bytes; record " +
                             std::to_string(i) + " needs " + std::to_string(need),
                         std::move(ctx));
    }
    // Its descriptors stay open while it is read: the reader keeps its last shard pinned
    // (detail::held_pin), so reads of one shard pin it once, not once per record.
    if (!held_.holds(k)) held_.hold(&state_->space.lru(), k);
    bool done = false;
    try {
      done = impl_.read(s, state_->key_base[k], local, i, dst, wait);
    } catch (...) {
      blame_truncation(s, local, i);
      throw;
    }
    note_mapped(k, s, local, 1, i);
    return done;
  }

  // Records first, first + 1, ... into dst[0], dst[1], ... with one system call when first's
  // shard is contiguous, up to that shard's end; returns how many (0 for a chunked shard).
  std::size_t read_run(std::uint64_t first, std::span<const std::span<std::byte>> dst) {
    const std::size_t k = state_->locate(first);
    const auto& s = state_->shard(k);
    if (!reads_adjacent(s)) return 0;
    const std::uint64_t local = first - state_->first(k);
    const std::uint64_t left = s.records - local;
    const std::size_t n = left < dst.size() ? static_cast<std::size_t>(left) : dst.size();
    const auto pin = state_->pin(k);
    read_adjacent(s, local, first, dst.first(n), iov_);
    note_mapped(k, s, local, n, first);
    return n;
  }

  // How reads from memory-mapped shards are confirmed (io/mapped_file.hpp: the last page of a
  // file truncated while mapped reads as zeros): by default each read confirms itself (one
  // fstat after it; a read that reached past the file's end now is its io_error). After
  // confirm_later(), reads are confirmed in groups by confirm_reads() (the loader's, per task).
  void confirm_later() noexcept { confirm_each_ = false; }

  // Confirms the reads since the last call: true when they all stand, false when a mapped shard
  // they read has shrunk meanwhile (one fstat per mapped shard read; pinned, so reopened when
  // closed meanwhile: a reopen that finds the file changed is that shard's error). Then
  // confirm(i) throws, for each record i read since, i's error when its bytes reached past the
  // shard's end now. Never throws.
  bool confirm_reads() noexcept {
    shrunk_.clear();
    shrunk_all_ = false;
    for (const std::size_t k : touched_) {
      try {
        const auto pin = state_->pin(k);
        const shard_index& s = state_->shard(k);
        if (const auto* m = s.file.as<io::mapped_file>())
          if (const std::uint64_t now = m->size_now(); now < m->size())
            shrunk_.push_back(shrunk_shard{k, now, nullptr});
      } catch (...) {
        try {
          shrunk_.push_back(shrunk_shard{k, 0, std::current_exception()});
        } catch (...) {  // no memory to say which: every record read fails
          shrunk_all_ = true;
        }
      }
    }
    touched_.clear();
    if (++stamp_ == 0) {  // wrapped: forget every old stamp
      std::fill(touched_at_.begin(), touched_at_.end(), 0);
      stamp_ = 1;
    }
    return shrunk_.empty() && !shrunk_all_;
  }

  // After confirm_reads() returned false: throws record i's error (naming i) when i's read does
  // not stand; returns otherwise.
  void confirm(std::uint64_t i) const {
    const std::size_t k = state_->locate(i);
    const shard_index& s = state_->shard(k);
    for (const shrunk_shard& x : shrunk_) {
      if (x.k != k) continue;
      if (x.error) rethrow_naming(x.error, i);
      check_reach(s, x.now, i - state_->first(k), 1, i);
    }
    if (shrunk_all_) {
      error_context ctx;
      ctx.file = s.path;
      ctx.record = i;
      throw io_error("out of memory while confirming reads from memory-mapped shards",
                     std::move(ctx));
    }
  }

  // Completes the oldest record read(wait = false) left unfinished.
  void finish_deferred(std::uint64_t i, std::span<std::byte> dst) {
    const std::size_t k = state_->locate(i);
    const auto pin = state_->pin(k);  // its chunks are read now
    try {
      impl_.finish_deferred(i, dst);
    } catch (...) {
      blame_truncation(state_->shard(k), i - state_->first(k), i);
      throw;
    }
    note_mapped(k, state_->shard(k), i - state_->first(k), 1, i);
  }

  // Decodes ahead the chunks records [first, first + count) will read (clipped to the source),
  // opening their shards, until the cache has no room or still_ahead() is false. Never throws:
  // what fails is left to the reads, which report it.
  void decode_ahead(std::uint64_t first, std::uint64_t count,
                    const ahead_of_reads& still_ahead) noexcept {
    try {
      bool go_on = true;
      state_->space.for_each_shard_part(
          first, count, [&](std::size_t k, std::uint64_t lo, std::uint64_t hi) {
            if (!go_on || !still_ahead()) return;
            const auto pin = state_->pin(k);
            go_on = impl_.decode_ahead(state_->shard(k), state_->key_base[k], lo, hi, still_ahead);
          });
    } catch (...) {
    }
  }

  // Stages record i for decoding on the device, its bytes going to `dst` in the batch's data
  // (device_stage.hpp). False: read it on the host (which reports whatever failed). Never throws.
  bool stage_device(std::uint64_t i, std::uint64_t dst, device_decode::batch_work& w,
                    device_decode::unit_directory& dir) noexcept {
    try {
      const std::size_t k = state_->locate(i);
      if (!held_.holds(k)) held_.release();
      const auto& s = state_->shard(k);
      if (!held_.holds(k)) held_.hold(&state_->space.lru(), k);
      return stager_.stage_record(s, k, state_->key_base[k], i - state_->first(k), dst, w, dir);
    } catch (...) {
      return false;
    }
  }

  // Stages the bands records [i, i + count) touch into batch work `w` ahead of their need (a
  // batch's share of block_shuffled's next window), those no place holds yet. Never throws.
  void stage_device_unit(std::uint64_t i, std::uint64_t count, device_decode::batch_work& w,
                         device_decode::unit_directory& dir) noexcept {
    try {
      for (const std::uint64_t end = i + count; i < end;) {
        const std::size_t k = state_->locate(i);
        const std::uint64_t stop = std::min(end, state_->first(k + 1));
        if (!held_.holds(k)) held_.release();
        const auto& s = state_->shard(k);
        if (!held_.holds(k)) held_.hold(&state_->space.lru(), k);
        stager_.stage_unit(s, state_->key_base[k], i - state_->first(k), stop - i, w, dir);
        i = stop;
      }
    } catch (...) {
    }
  }

  // Helps stage the bands batch work `w` stages ahead (batch_work::ahead_work), if any: called
  // by each of the batch's tasks once its own records are staged. Never throws.
  void stage_device_ahead(device_decode::batch_work& w,
                          device_decode::unit_directory& dir) noexcept {
    try {
      const device_decode::ahead_span a = w.ahead_work();
      if (!a.active) return;
      if (!held_.holds(a.shard)) held_.release();
      const auto& s = state_->shard(a.shard);
      if (!held_.holds(a.shard)) held_.hold(&state_->space.lru(), a.shard);
      stager_.stage_ahead(s, a.key_base, a.first, a.last, w, dir);
    } catch (...) {
    }
  }

  // Drops the scratch buffers past `keep` bytes, and the pin on the shard read last.
  void idle(std::size_t keep) noexcept {
    impl_.release(keep);
    held_.release();
  }

 private:
  // The end of the file bytes a read of record `local` of s reaches: its own bytes' end for
  // contiguous data, the end of the last stored chunk it touches for chunked data (whoever
  // decoded those chunks: bytes below a file's size now were never zeroed).
  static std::uint64_t read_end(const shard_index& s, std::uint64_t local) {
    if (s.kind == read_kind::contiguous)
      return s.base + (s.blob ? s.offsets[local + 1] : (local + 1) * s.row_bytes);
    std::uint64_t end = 0;
    const auto reach = [&](std::uint64_t k) {
      const chunk_entry& c = s.chunks[static_cast<std::size_t>(k)];
      end = std::max(end, c.address + c.size);
    };
    if (!s.blob && s.rows.usable()) {
      const std::uint64_t base = local / s.rows.band_rows * s.rows.band_chunks;
      for (const std::uint64_t k : s.rows.plan.chunk) reach(base + k);
    } else {
      record_plan plan;
      plan.build(s.grid, s.box(local));
      for (const std::uint64_t k : plan.chunk) reach(k);
    }
    return end;
  }

  // Called from a catch block, for a read of record `local` (global index `global`) of s that
  // failed: when s is mapped and has shrunk below the bytes the read reached, throws the
  // truncation's io_error instead (zeros read from the new last page made a chunk fail to
  // decode: the cause is the truncation, not damage). Returns otherwise, for the caller to
  // rethrow the read's own error.
  static void blame_truncation(const shard_index& s, std::uint64_t local, std::uint64_t global) {
    if (!s.description.mapped) return;
    const auto* m = s.file.as<io::mapped_file>();
    std::uint64_t now = 0;
    try {
      now = m->size_now();
    } catch (...) {
      return;  // cannot tell: the read's own error stands
    }
    check_reach(s, now, local, 1, global);
  }

  // Throws the truncation's io_error (naming its record) for the first of records
  // [local, local + count) of mapped shard s (record `global` first) whose bytes reach past
  // `now`, the file's size now; returns when the file has not shrunk or none does.
  static void check_reach(const shard_index& s, std::uint64_t now, std::uint64_t local,
                          std::uint64_t count, std::uint64_t global) {
    const auto* m = s.file.as<io::mapped_file>();
    if (now >= m->size()) return;
    for (std::uint64_t j = 0; j < count; ++j)  // a run: records in file order
      if (const std::uint64_t end = read_end(s, local + j); end > now)
        throw m->shrunk_error(now, end, global + j);
  }

  // A read of records [local, local + count) of mapped shard k (record `global` first) is done:
  // confirmed now (confirm_each_; io_error naming `global` when it reached past the file's end
  // now), or noted for confirm_reads().
  void note_mapped(std::size_t k, const shard_index& s, std::uint64_t local, std::uint64_t count,
                   std::uint64_t global) {
    if (!s.description.mapped || count == 0) return;
    if (confirm_each_) {
      check_reach(s, s.file.as<io::mapped_file>()->size_now(), local, count, global);
      return;
    }
    if (touched_at_.size() <= k) touched_at_.resize(state_->shard_count(), 0);
    if (touched_at_[k] == stamp_) return;
    touched_.push_back(k);
    touched_at_[k] = stamp_;
  }

  // Throws e again, naming record i when it names none (a shard's confirmation covers all the
  // records read from it).
  [[noreturn]] static void rethrow_naming(const std::exception_ptr& e, std::uint64_t i) {
    try {
      std::rethrow_exception(e);
    } catch (const io_error& x) {
      error_context c = x.context();
      if (!c.record) c.record = i;
      throw io_error(x.message(), std::move(c));
    }
  }

  std::shared_ptr<const source_state> state_;  // declared first: outlives impl_
  held_pin held_;  // the shard read last, pinned until another is read or idle()
  record_reader impl_;
  std::vector<iovec> iov_;  // read_run's scratch
  device_stager stager_;    // stage_device's plans and unit lists
  bool confirm_each_ = true;
  // Mapped shards read since the last confirm_reads(): touched_at_[k] == stamp_ for those in
  // touched_. What the last confirm_reads() found: shards that shrank (their size now), or
  // whose check failed (error).
  std::vector<std::size_t> touched_;
  std::vector<std::uint32_t> touched_at_;
  std::uint32_t stamp_ = 1;
  struct shrunk_shard {
    std::size_t k;
    std::uint64_t now;
    std::exception_ptr error;
  };
  std::vector<shrunk_shard> shrunk_;
  bool shrunk_all_ = false;
};

}  // namespace gpufeed::detail::hdf5
