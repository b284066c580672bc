// gpufeed — the source concept: a fixed set of records the loader can read in any order.
//
// A source is an indexable record space [0, size()). Sizes are known before reading (the loader
// packs a batch by computing every record's place first), and reads write straight into caller
// memory — usually the record's final place in a pinned batch slot — so no intermediate copy is
// needed.
//
// Contract of a type S modelling gpufeed::source:
//   s.size()           -> std::uint64_t   number of records; constant for the source's lifetime
//   s.record_size(i)   -> std::size_t     bytes read(i, ...) writes (decoded size); cheap, no I/O
//   s.read(i, dst)                         writes exactly record_size(i) bytes to dst.data();
//                                          thread-safe; dst.size() >= record_size(i) or it throws
//                                          config_error; failures throw gpufeed::error subclasses
//                                          naming the file and the record
// Optional members, detected by the concepts below:
//   s.fixed_record_size() -> std::size_t  the common size of every record, or 0 when they vary
//   s.has_labels() -> bool, s.label(i) -> std::int64_t   per-record integer label (thread-safe)
//   s.make_reader() -> R                  a per-thread reader with R::read(i, dst), for sources
//                                          that keep state per thread (decompressed chunk cache,
//                                          LMDB read transaction). A reader is used by one thread
//                                          at a time; it may define idle(), called when its thread
//                                          finishes a batch, to drop resources it holds meanwhile
//                                          (e.g. mdb_txn_reset).
//   r.view(i) -> std::span<const std::byte>   on a reader (or s.view(i), thread-safe, on the
//                                          source): record i's bytes in memory the reader or
//                                          source owns, valid until that reader's next call
//                                          (read, view, idle) — for a source that already holds
//                                          records in memory. The loader's per-record transform
//                                          stage (record_transform.hpp) takes them instead of
//                                          reading into its scratch buffer: no copy at all.
//   s.decode_unit(i) -> std::uint64_t     records with equal values share decoding work (one
//                                          compressed chunk band) and are consecutive; cheap, no
//                                          I/O. The loader keeps such runs in one worker task when
//                                          it picks task sizes itself in sequential order, so a
//                                          chunk is decoded once, not once per task that touches
//                                          it; block_shuffled order never splits them.
//   s.plan_reads(const read_plan&)        told once by each loader, before its workers start, how
//                                          it will read (window, look-ahead, workers), so the
//                                          source can size what it keeps (hdf5_source: the
//                                          decoded-chunk cache budget). Const and thread-safe.
//   s.will_need(first, count)             advice: records [first, first + count) will be read
//                                          soon; start fetching them (posix_fadvise / madvise
//                                          WILLNEED). noexcept, cheap, never blocks on I/O; a
//                                          range past the end is clipped.
//   s.decode_stats() -> gpufeed::decode_stats   cumulative decode counters (decode_stats.hpp);
//                                          the loader reports them in loader_stats::decode.
//   s.file_of(i) -> path-like             the file that holds record i, without opening it or
//                                          any other file (hdf5_source, lmdb_source: the shard as
//                                          given); the loader names it in errors of a per-record
//                                          transform. Cheap and non-blocking; it throws only
//                                          config_error for an index out of range.
//   s.name_of(i) -> std::optional<std::string>   record i's input name: the file name it had
//                                          in the folder `gpufeed pack` read, relative to
//                                          that folder ("train/cat/0042.jpg"); nullopt when the
//                                          source does not know it (no names stored). It may do
//                                          I/O (hdf5_source reads the shard's names table), so
//                                          the loader asks only when a per-record transform
//                                          fails, never while reading, and names the input in
//                                          that error (error_context::input,
//                                          skipped_record::input). Thread-safe; it throws
//                                          config_error for an index out of range, and
//                                          format_error / io_error for a names table it cannot
//                                          read.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>

namespace gpufeed::detail::device_decode {  // detail/device_decode/ (complete where used)
class batch_work;
class unit_directory;
struct device_units;
}  // namespace gpufeed::detail::device_decode

namespace gpufeed {

// What a loader tells its source about the reads to come (plan_reads).
struct read_plan {
  // Shuffle window of a locality-aware order: decode units whose records are shuffled together,
  // and those units' records. 0 when the order has no window (sequential, shuffled).
  std::uint64_t window_units = 0;
  std::uint64_t window_records = 0;
  // Records the planner may have in flight ahead of the consumer (prefetch x batch_size).
  std::uint64_t lookahead_records = 0;
  std::size_t workers = 0;
  // The loader's idle workers decode the next window's units ahead of its reads (readers with
  // decode_ahead, block_shuffled order): room for a second window.
  bool decode_ahead = false;
  // Records are read in full random order (sample_order::shuffled): a source that fetches more
  // than a record for one read (hdf5_source's remote units) reads each record alone instead.
  bool random_records = false;
};

template <class S>
concept source = requires(const S& s, std::uint64_t i, std::span<std::byte> dst) {
  { s.size() } -> std::convertible_to<std::uint64_t>;
  { s.record_size(i) } -> std::convertible_to<std::size_t>;
  s.read(i, dst);
};

template <class S>
concept fixed_size_aware_source = source<S> && requires(const S& s) {
  { s.fixed_record_size() } -> std::convertible_to<std::size_t>;
};

template <class S>
concept labeled_source = source<S> && requires(const S& s, std::uint64_t i) {
  { s.has_labels() } -> std::convertible_to<bool>;
  { s.label(i) } -> std::convertible_to<std::int64_t>;
};

template <class S>
concept reader_source = source<S> && requires(const S& s, std::uint64_t i,
                                              std::span<std::byte> dst) {
  s.make_reader();
  s.make_reader().read(i, dst);
};

template <class R>
concept view_reader = requires(R& r, std::uint64_t i) {
  { r.view(i) } -> std::convertible_to<std::span<const std::byte>>;
};

template <class S>
concept decode_unit_source = source<S> && requires(const S& s, std::uint64_t i) {
  { s.decode_unit(i) } -> std::convertible_to<std::uint64_t>;
};

template <class S>
concept read_planning_source = source<S> && requires(const S& s, const read_plan& p) {
  s.plan_reads(p);
};

template <class S>
concept read_ahead_source = source<S> && requires(const S& s, std::uint64_t i) {
  { s.will_need(i, i) } noexcept;
};

template <class S>
concept decode_stats_source = source<S> && requires(const S& s) { s.decode_stats(); };

template <class S>
concept file_naming_source = source<S> && requires(const S& s, std::uint64_t i) {
  std::filesystem::path(s.file_of(i));
};

template <class S>
concept record_naming_source = source<S> && requires(const S& s, std::uint64_t i) {
  { s.name_of(i) } -> std::convertible_to<std::optional<std::string>>;
};

// Passes the plan to sources that take one.
template <source S>
void plan_reads(const S& s, const read_plan& p) {
  if constexpr (read_planning_source<S>) s.plan_reads(p);
}

// Advises sources that take advice; a no-op for the others.
template <source S>
void will_need(const S& s, std::uint64_t first, std::uint64_t count) noexcept {
  if constexpr (read_ahead_source<S>) s.will_need(first, count);
}

// The per-thread reader the loader's workers use: the source's own reader when it has one,
// otherwise a thin view that forwards to the (thread-safe) source.
template <source S>
class plain_reader {
 public:
  explicit plain_reader(const S& s) noexcept : source_(&s) {}
  void read(std::uint64_t i, std::span<std::byte> dst) { source_->read(i, dst); }
  std::span<const std::byte> view(std::uint64_t i)
    requires view_reader<const S>
  {
    return source_->view(i);
  }
  void idle() noexcept {}

 private:
  const S* source_;
};

template <source S>
auto make_reader(const S& s) {
  if constexpr (reader_source<S>)
    return s.make_reader();
  else
    return plain_reader<S>(s);
}

// Whether work decoded ahead for one window is still ahead of that window's reads: false once
// a worker has begun to read the window's records. From then on its reads may have read a unit
// whole, and the cache evicted it as spent, so decoding it ahead now would decode it twice in
// one epoch. A decode_ahead_reader calls it before it enters each unit in its cache, under the
// lock a read of that unit takes (so no read of the window can slip between the check and the
// entry), and stops at false. Default-constructed: always ahead.
class ahead_of_reads {
 public:
  ahead_of_reads() noexcept = default;
  // `begun`: how many windows (counted over epochs) the workers have begun to read; `window`:
  // the number of the window decoded ahead in that count (epoch * windows per epoch + window).
  ahead_of_reads(const std::atomic<std::uint64_t>& begun, std::uint64_t window) noexcept
      : begun_(&begun), window_(window) {}
  [[nodiscard]] bool operator()() const noexcept {
    return !begun_ || begun_->load(std::memory_order_acquire) <= window_;
  }

 private:
  const std::atomic<std::uint64_t>* begun_ = nullptr;
  std::uint64_t window_ = 0;
};

// A per-thread reader that can decode records ahead of their reads into its source's cache:
// r.decode_ahead(first, count, still_ahead), noexcept (a failure is left to the read, which
// reports it), entering no unit once still_ahead() is false.
template <class R>
concept decode_ahead_reader = requires(R& r, std::uint64_t i, const ahead_of_reads& a) {
  { r.decode_ahead(i, i, a) } noexcept;
};

// A per-thread reader that need not wait for decoding work another reader has started:
// r.try_read(i, dst) reads record i or, returning false, leaves its remainder for
// r.finish_deferred(i, dst), which the caller calls for each such record in the order they were
// left, before anything else on that reader. The loader's workers read a task's other records
// meanwhile.
template <class R>
concept deferring_reader = requires(R& r, std::uint64_t i, std::span<std::byte> dst) {
  { r.try_read(i, dst) } -> std::convertible_to<bool>;
  r.finish_deferred(i, dst);
};

// A per-thread reader that reads a run of adjacent records with one call:
// r.read_run(first, dst) reads records first, first + 1, ... into dst[0], dst[1], ... (each span
// exactly its record's size) and returns how many it read, a prefix of the run (0: none, read
// them one by one). An error may leave some of dst written; the loader then reads the run's
// records one by one, so each failure names its own record.
template <class R>
concept run_reader = requires(R& r, std::uint64_t i, std::span<const std::span<std::byte>> dst) {
  { r.read_run(i, dst) } -> std::convertible_to<std::size_t>;
};

// A per-thread reader whose reads stand only once confirmed (a read from a memory map of a file
// truncated meanwhile copies zeros from its last page, with no error), by default each read
// by itself. After r.confirm_later() (noexcept) it confirms in groups: r.confirm_reads()
// (noexcept) says whether every read since its last call stands; when it says false,
// r.confirm(i) throws, for a record i read since, i's error when i's read does not stand. The
// loader confirms after each task, before the batch is delivered.
template <class R>
concept confirming_reader = requires(R& r, std::uint64_t i) {
  { r.confirm_later() } noexcept;
  { r.confirm_reads() } noexcept -> std::convertible_to<bool>;
  r.confirm(i);
};

// A source whose records can be decoded on the loader's device (docs/design.md, "GPU decode in
// the loader"): s.device_units() sizes the device cache (place_bytes 0: none can), and its
// reader's r.stage_device(i, dst, work, directory) (noexcept) stages record i for the device
// instead of reading it, or returns false for the loader to read it on the host;
// r.stage_device_ahead(work, directory) (noexcept), called at the end of each of a batch's tasks,
// helps stage the units the batch stages ahead of need; r.stage_device_unit(i, n, work,
// directory) (noexcept) stages the units records [i, i + n) are decoded from ahead of need.
template <class S>
using source_reader_t = decltype(std::declval<const S&>().make_reader());

template <class S>
concept device_decoding_source =
    reader_source<S> &&
    requires(const S& s, source_reader_t<S>& r, std::uint64_t i,
             detail::device_decode::batch_work& w, detail::device_decode::unit_directory& d) {
      { s.device_units() } -> std::convertible_to<detail::device_decode::device_units>;
      { r.stage_device(i, i, w, d) } noexcept -> std::convertible_to<bool>;
      { r.stage_device_ahead(w, d) } noexcept;
      { r.stage_device_unit(i, i, w, d) } noexcept;
    };

// Calls r.idle() when the reader defines it.
template <class R>
void reader_idle(R& r) noexcept {
  if constexpr (requires { r.idle(); }) r.idle();
}

// 0 when the source does not promise a fixed record size.
template <source S>
std::size_t fixed_record_size(const S& s) {
  if constexpr (fixed_size_aware_source<S>)
    return static_cast<std::size_t>(s.fixed_record_size());
  else
    return 0;
}

template <source S>
bool has_labels(const S& s) {
  if constexpr (labeled_source<S>)
    return static_cast<bool>(s.has_labels());
  else
    return false;
}

}  // namespace gpufeed
