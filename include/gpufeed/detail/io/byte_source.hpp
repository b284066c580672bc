// gpufeed — the one seam shard bytes are read through: a read-only byte source with a size and a
// name (the file its errors name), read at any offset by many threads at once.
//
// Every byte gpufeed reads itself goes through byte_source: HDF5 records and chunks, the layout
// and chunk checks before HDF5 decodes, HDF5's own reads through gpufeed's file driver, LMDB's
// meta pages and B-tree check, a shard's fingerprint, pack's input files. posix_file.hpp
// implements pread(2) on a descriptor, mapped_file.hpp a read-only memory map; a reader that
// coalesces ranges, or a ranged-HTTP reader, stands in by implementing the primitives below.
// (LMDB's records are not read here: LMDB hands out pointers into its own memory map,
// lmdb/reading.hpp.)
//
// The checks live here, once, not in each reader or caller: a short read is continued, EINTR is
// retried, an end of the source before the bytes asked for is a truncation (an io_error naming
// the source, the record and the byte — never zeros), a failed read an io_error with the errno.
// An implementation only says what one attempt did (read_attempt); try_read() turns attempts
// into what the whole read came to (read_outcome), read_exact() into bytes or that io_error.
//
// Dispatch is dynamic (virtual), chosen for the hot path: a worker reads a record, a chunk or a
// run of records with one read_exact / read_scatter, which makes ONE virtual call per attempt
// (one per read unless the OS returns short). That call costs a few nanoseconds; the reads it
// stands for move a few hundred bytes at least (a small record; usually kilobytes: a chunk, a
// run) and, for pread, cost a system call of a microsecond or more — the indirection is under
// 1% of the smallest read. In return a shard holds any reader behind one pointer
// (owned_source), chosen at run time (a test double, an HTTP reader for a URL), without making
// hdf5_source, its shard index and every function that reads a shard a template on the reader
// type. A reader whose per-call cost is nanoseconds (memcpy from a map) still pays one virtual
// call per record, not per byte: reads are whole records or runs, never byte loops.
#pragma once

#include <sys/uio.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <utility>

#include "gpufeed/error.hpp"

namespace gpufeed::detail::io {

// One range of a read_ranges() call: `size` bytes of the source from `offset` on, into dst.
struct byte_range {
  void* dst = nullptr;
  std::size_t size = 0;
  std::uint64_t offset = 0;
};

// What one attempt of a source's primitive read did.
struct read_attempt {
  std::size_t got = 0;  // bytes read (1 .. asked); 0 with err == 0: the source ends at the offset
  int err = 0;          // an errno value when the attempt failed (EINTR: interrupted, tried again)
};

// What a whole read came to: every byte (ok()), or it stopped at byte `at` of the source because
// a read failed (err: its errno) or the source ended there (read earlier than its size: it was
// truncated after it was opened). api: the call that stopped ("pread", "preadv").
struct read_outcome {
  enum class stop : unsigned char { none, failed, ended };
  stop why = stop::none;
  int err = 0;
  const char* api = "";
  std::uint64_t at = 0;
  [[nodiscard]] bool ok() const noexcept { return why == stop::none; }
};

// "unexpected end of file at byte N (the file was truncated after it was opened?)"
inline std::string ended_text(std::uint64_t at) {
  return "unexpected end of file at byte " + std::to_string(at) +
         " (the file was truncated after it was opened?)";
}

// The io_error of a read that stopped (o.ok() false) on source `name`, naming `record` when
// given: "read failed" (api, errno and its text in the context) or ended_text(at). `what`, when
// given, says which operation the read served (an HDF5 call made through gpufeed's file driver,
// hdf5/library.hpp) and leads the message, a failed read then naming its byte too:
// "what: read failed at byte N", "what: unexpected end of file at byte N (...)".
[[noreturn]] inline void throw_read_error(const read_outcome& o, const std::string& name,
                                          std::optional<std::uint64_t> record,
                                          const std::string& what = std::string(),
                                          std::source_location where =
                                              std::source_location::current()) {
  const std::string lead = what.empty() ? std::string() : what + ": ";
  if (o.why == read_outcome::stop::failed)
    throw io_error(what.empty() ? std::string("read failed")
                                : lead + "read failed at byte " + std::to_string(o.at),
                   os_call_context(name, o.api, o.err, record), where);
  error_context ctx;
  ctx.file = name;
  ctx.record = record;
  ctx.api = o.api;
  throw io_error(lead + ended_text(o.at), std::move(ctx), where);
}

class byte_source {
 public:
  virtual ~byte_source() = default;

  // Bytes the source had when it was opened: offsets past it are never asked for by the checks
  // gpufeed makes from it; a read that finds fewer means the source shrank.
  [[nodiscard]] virtual std::uint64_t size() const noexcept = 0;
  // What errors name as the file (a path, a URL).
  [[nodiscard]] virtual const std::string& name() const noexcept = 0;

  // Hint that [offset, offset + bytes) will be read soon (read-ahead); may do nothing.
  virtual void will_need(std::uint64_t /*offset*/, std::uint64_t /*bytes*/) const noexcept {}
  // Lets go of what the source holds open (a descriptor, a map, a connection) while no read is
  // in flight (shard_lru's max_open_shards); reopen() takes it again before the next read,
  // io_error when it cannot and format_error when the source is no longer what was opened.
  // Neither may run while another thread reads.
  virtual void close() noexcept {}
  virtual void reopen() {}

  // --- reads: thread-safe, each from its own offset ---

  // Reads n bytes at `offset` into dst: what the read came to (never throws). The one loop that
  // continues short reads, retries EINTR and tells a failure from an early end.
  read_outcome try_read(void* dst, std::size_t n, std::uint64_t offset) const noexcept {
    auto* p = static_cast<std::byte*>(dst);
    while (n > 0) {
      const read_attempt a = read_some(p, n, offset);
      if (a.err == EINTR) continue;
      if (a.err != 0) return {read_outcome::stop::failed, a.err, api(false), offset};
      if (a.got == 0) return {read_outcome::stop::ended, 0, api(false), offset};
      const std::size_t got = a.got < n ? a.got : n;
      p += got;
      n -= got;
      offset += got;
    }
    return {};
  }

  // As try_read, for one range of the source read into the buffers `parts` in order (a scatter
  // read: preadv for pread; at most scatter_parts buffers an attempt; `parts` is consumed).
  static constexpr std::size_t scatter_parts = 1024;  // IOV_MAX on Linux
  read_outcome try_read_scatter(std::span<iovec> parts, std::uint64_t offset) const noexcept {
    while (!parts.empty() && parts.front().iov_len == 0) parts = parts.subspan(1);
    while (!parts.empty()) {
      const std::size_t count = parts.size() < scatter_parts ? parts.size() : scatter_parts;
      const read_attempt a = read_some_scatter(parts.data(), count, offset);
      if (a.err == EINTR) continue;
      if (a.err != 0) return {read_outcome::stop::failed, a.err, api(true), offset};
      if (a.got == 0) return {read_outcome::stop::ended, 0, api(true), offset};
      offset += a.got;
      std::size_t left = a.got;
      while (!parts.empty() && left >= parts.front().iov_len) {
        left -= parts.front().iov_len;
        parts = parts.subspan(1);
      }
      if (left && !parts.empty()) {  // a part read in part: the rest of it next
        parts.front().iov_base = static_cast<std::byte*>(parts.front().iov_base) + left;
        parts.front().iov_len -= left;
      }
    }
    return {};
  }

  // Reads exactly n bytes at `offset`. io_error naming the source (and `record` when given) on a
  // failed read or an early end (the source was truncated after it was opened).
  void read_exact(void* dst, std::size_t n, std::uint64_t offset,
                  std::optional<std::uint64_t> record = std::nullopt) const {
    if (const read_outcome o = try_read(dst, n, offset); !o.ok())
      throw_read_error(o, name(), record);
  }

  // Reads one range from `offset` on into the buffers `parts`, in order, with as few calls as
  // the source allows (`parts` is consumed). Errors as read_exact, naming `record`.
  void read_scatter(std::span<iovec> parts, std::uint64_t offset,
                    std::optional<std::uint64_t> record = std::nullopt) const {
    if (const read_outcome o = try_read_scatter(parts, offset); !o.ok())
      throw_read_error(o, name(), record);
  }

  // Reads several ranges, each into its own buffer. Ranges that follow each other in the source
  // (one's offset + size is the next one's offset) are read together as one scatter read;
  // others one by one, in order. Errors as read_exact, naming `record` (one for the call).
  void read_ranges(std::span<const byte_range> ranges,
                   std::optional<std::uint64_t> record = std::nullopt) const {
    std::array<iovec, scatter_parts> parts;
    std::size_t i = 0;
    while (i < ranges.size()) {
      if (ranges[i].size == 0) {
        ++i;
        continue;
      }
      // The group [i, j) of ranges that follow each other, gathered into `parts` up to their
      // number; buffers that also follow each other in memory become one part.
      const std::uint64_t start = ranges[i].offset;
      std::uint64_t end = start;
      std::size_t n = 0, j = i;
      for (; j < ranges.size() && n < parts.size(); ++j) {
        const byte_range& r = ranges[j];
        if (r.size == 0) continue;
        if (r.offset != end) break;
        end += r.size;
        if (n && static_cast<std::byte*>(parts[n - 1].iov_base) + parts[n - 1].iov_len == r.dst)
          parts[n - 1].iov_len += r.size;
        else
          parts[n++] = iovec{r.dst, r.size};
      }
      if (n == 1)
        read_exact(parts[0].iov_base, parts[0].iov_len, start, record);
      else
        read_scatter(std::span<iovec>(parts.data(), n), start, record);
      i = j;
    }
  }

 protected:
  byte_source() = default;
  byte_source(const byte_source&) = default;
  byte_source(byte_source&&) = default;
  byte_source& operator=(const byte_source&) = default;
  byte_source& operator=(byte_source&&) = default;

  // --- what an implementation provides: one attempt each, no retries, no checks ---

  // Reads up to n (> 0) bytes at `offset`: {got > 0}, {0} at the end of the source, or {0, errno}.
  virtual read_attempt read_some(void* dst, std::size_t n, std::uint64_t offset) const noexcept = 0;
  // As read_some into `count` (> 0) buffers in order. By default the first buffer alone (the
  // callers go on with the rest): a source that can fill several in one call overrides it.
  virtual read_attempt read_some_scatter(const iovec* parts, std::size_t /*count*/,
                                         std::uint64_t offset) const noexcept {
    return read_some(parts[0].iov_base, parts[0].iov_len, offset);
  }
  // The call errors name as api for a read (scatter: read_some_scatter's).
  [[nodiscard]] virtual const char* api(bool scatter) const noexcept = 0;
};

// A byte source owned by its holder (a shard's index), whichever implementation: one pointer,
// the byte_source calls forwarded. Empty only when default-constructed or moved from (no call
// may be made then but operator bool).
class owned_source {
 public:
  owned_source() noexcept = default;
  explicit owned_source(std::unique_ptr<byte_source> s) noexcept : s_(std::move(s)) {}

  explicit operator bool() const noexcept { return s_ != nullptr; }
  [[nodiscard]] const byte_source& source() const noexcept { return *s_; }
  // The implementation when it is a T, or null (for what only one reader has).
  template <class T>
  [[nodiscard]] const T* as() const noexcept {
    return dynamic_cast<const T*>(s_.get());
  }

  // The implementation when it is a T, moved out (this source is then empty), or null.
  template <class T>
  [[nodiscard]] std::unique_ptr<T> take() noexcept {
    if (!dynamic_cast<T*>(s_.get())) return nullptr;
    return std::unique_ptr<T>(static_cast<T*>(s_.release()));
  }

  [[nodiscard]] std::uint64_t size() const noexcept { return s_->size(); }
  [[nodiscard]] const std::string& name() const noexcept { return s_->name(); }
  void will_need(std::uint64_t offset, std::uint64_t bytes) const noexcept {
    s_->will_need(offset, bytes);
  }
  void close() noexcept { s_->close(); }
  void reopen() { s_->reopen(); }

  void read_exact(void* dst, std::size_t n, std::uint64_t offset,
                  std::optional<std::uint64_t> record = std::nullopt) const {
    s_->read_exact(dst, n, offset, record);
  }
  void read_scatter(std::span<iovec> parts, std::uint64_t offset,
                    std::optional<std::uint64_t> record = std::nullopt) const {
    s_->read_scatter(parts, offset, record);
  }
  void read_ranges(std::span<const byte_range> ranges,
                   std::optional<std::uint64_t> record = std::nullopt) const {
    s_->read_ranges(ranges, record);
  }

 private:
  std::unique_ptr<byte_source> s_;
};

}  // namespace gpufeed::detail::io
