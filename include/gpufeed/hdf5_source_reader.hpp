// gpufeed — hdf5_source's per-thread reader. Included by hdf5_source.hpp (include that).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "gpufeed/detail/hdf5/source_reader.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed {

// Per-thread reader: decoder state and scratch buffers (decoded chunks live in the source's
// shared cache; between reads it may keep one band of them pinned, let go by idle() and by its
// destructor). Not thread-safe itself; one per worker thread. Movable. It holds the source's
// state, so it may outlive the source object.
class hdf5_source::reader {
 public:
  // config_error when i is out of range or dst is smaller than record_size(i).
  void read(std::uint64_t i, std::span<std::byte> dst) { (void)impl_.read(i, dst, true); }

  // As read(), but never waits for a chunk another reader (another worker) is decoding: the rest
  // of the record is done, and false says its remaining chunks are left for finish_deferred().
  // A worker with more records to read takes them meanwhile instead of queueing behind that
  // decode (docs/design.md, "HDF5 compressed chunks", deferred records). True: the record is
  // complete.
  bool try_read(std::uint64_t i, std::span<std::byte> dst) { return impl_.read(i, dst, false); }

  // Reads records first, first + 1, ... into dst[0], dst[1], ... (each exactly its record's
  // size) with one system call when they are adjacent in their file (a contiguous dataset) and
  // returns how many it read: all of them, or those up to the end of first's shard; 0 when
  // first's shard is chunked (read those one by one). Errors as read(), naming `first`.
  std::size_t read_run(std::uint64_t first, std::span<const std::span<std::byte>> dst) {
    return impl_.read_run(first, dst);
  }

  // Completes the oldest record try_read() left unfinished (pass the same i and dst), waiting
  // for its chunks; records are finished in the order they were left. Errors as read().
  void finish_deferred(std::uint64_t i, std::span<std::byte> dst) { impl_.finish_deferred(i, dst); }

  // Decodes ahead, into the shared cache, the chunks records [first, first + count) will read
  // (the loader's workers do it for block_shuffled's next window) while the cache has room
  // without evicting chunks still being read and still_ahead() holds (source.hpp). Opens
  // shards. Never throws: a shard or chunk that fails is left to the reads, which report it.
  void decode_ahead(std::uint64_t first, std::uint64_t count,
                    const ahead_of_reads& still_ahead = {}) noexcept {
    impl_.decode_ahead(first, count, still_ahead);
  }

  // Reads of shards read through a memory map (hdf5_shard_info::mapped) are confirmed after
  // the fact: the last page of a file truncated while mapped reads as zeros, not as an error.
  // By default each read confirms itself (one fstat; a record whose bytes reached past the
  // file's end now is an io_error naming it). After confirm_later() (the loader's workers)
  // confirm_reads() confirms the reads since its last call: true when they all stand, one
  // fstat per mapped shard read; when false, confirm(i) throws, for each record i read since,
  // i's io_error when its read does not stand. Never throws but confirm().
  void confirm_later() noexcept { impl_.confirm_later(); }
  bool confirm_reads() noexcept { return impl_.confirm_reads(); }
  void confirm(std::uint64_t i) const { impl_.confirm(i); }

  // Stages record i for decoding on the device instead of reading it (docs/design.md, "GPU
  // decode in the loader"): the bands of compressed chunks it touches are in the device cache or
  // staged into batch work `w` (their compressed bytes and units), and the runs that gather it
  // to `dst` in the batch's data are in `w`. False: it cannot be (a shard whose chunks the
  // device does not decode, no room, bytes that cannot be read): read it with read(), which
  // reports any error. Never throws.
  bool stage_device(std::uint64_t i, std::uint64_t dst, detail::device_decode::batch_work& w,
                    detail::device_decode::unit_directory& dir) noexcept {
    return impl_.stage_device(i, dst, w, dir);
  }
  // Stages the units records [i, i + count) are decoded from into the batch of work `w`, ahead
  // of their need (block_shuffled's next window), where the device cache does not hold them.
  void stage_device_unit(std::uint64_t i, std::uint64_t count,
                         detail::device_decode::batch_work& w,
                         detail::device_decode::unit_directory& dir) noexcept {
    impl_.stage_device_unit(i, count, w, dir);
  }
  // Helps stage the units the batch of work `w` stages ahead of need, once this reader's task
  // has staged its own records (sequential order: docs/design.md, "GPU decode in the loader").
  void stage_device_ahead(detail::device_decode::batch_work& w,
                          detail::device_decode::unit_directory& dir) noexcept {
    impl_.stage_device_ahead(w, dir);
  }

  // Drops this reader's scratch buffers when they hold more than 16 MiB (the shared cache of
  // decoded chunks stays: the next batch may reuse it), and its pin on the shard it read last.
  void idle() noexcept { impl_.idle(std::size_t{16} << 20); }

 private:
  friend class hdf5_source;
  explicit reader(std::shared_ptr<const detail::hdf5::source_state> state)
      : impl_(std::move(state)) {}

  detail::hdf5::source_reader impl_;
};

inline void hdf5_source::read(std::uint64_t i, std::span<std::byte> dst) const {
  (void)state();  // config_error on a moved-from source
  reader r(state_);
  r.read(i, dst);  // confirms itself
}

inline hdf5_source::reader hdf5_source::make_reader() const {
  (void)state();  // config_error on a moved-from source
  return reader(state_);
}

}  // namespace gpufeed
