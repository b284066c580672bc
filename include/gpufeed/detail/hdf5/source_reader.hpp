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
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/detail/hdf5/adjacent_read.hpp"
#include "gpufeed/detail/hdf5/record_reader.hpp"
#include "gpufeed/detail/hdf5/source_state.hpp"
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
    return impl_.read(s, state_->key_base[k], local, i, dst, wait);
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
    return n;
  }

  // Completes the oldest record read(wait = false) left unfinished.
  void finish_deferred(std::uint64_t i, std::span<std::byte> dst) {
    const auto pin = state_->pin(state_->locate(i));  // its chunks are read now
    impl_.finish_deferred(i, dst);
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

  // Drops the scratch buffers past `keep` bytes, and the pin on the shard read last.
  void idle(std::size_t keep) noexcept {
    impl_.release(keep);
    held_.release();
  }

 private:
  std::shared_ptr<const source_state> state_;  // declared first: outlives impl_
  held_pin held_;  // the shard read last, pinned until another is read or idle()
  record_reader impl_;
  std::vector<iovec> iov_;  // read_run's scratch
};

}  // namespace gpufeed::detail::hdf5
