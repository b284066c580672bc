// gpufeed — pack(): reading input files into batches on worker threads, handed to the single
// writer in batch order (part of gpufeed/pack/pack.hpp).
//
// Workers claim batches in order but only within a window ahead of the writer, so memory stays
// bounded (window x batch bytes) however fast reading is; the writer takes batch k only after
// k-1, which keeps the output independent of thread count and timing.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/detail/byte_buffer.hpp"
#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/detail/thread_group.hpp"
#include "gpufeed/detail/unique_handle.hpp"
#include "gpufeed/pack/detail/codecs.hpp"
#include "gpufeed/pack/detail/plan.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::pack {

// What a worker hands the writer for one batch. Recycled (batch_pipeline::recycle), so buffers
// are allocated once per window slot, not once per batch.
struct batch_data {
  byte_buffer bytes;  // the batch's range of the stream (raw; + zero padding when chunked)
  std::vector<std::vector<std::byte>> chunks;  // chunked: its chunks, compressed, in order
  std::vector<std::uint32_t> crc;  // per record of the batch: crc32 of the part it holds
  std::exception_ptr error;        // rethrown by the writer when it reaches this batch
};

[[noreturn]] inline void input_fail(const std::string& what, const std::filesystem::path& p,
                                    const char* api = nullptr, int e = 0) {
  error_context c;
  if (api)
    c = os_call_context(p.string(), api, e);
  else
    c.file = p.string();
  throw io_error(what, std::move(c));
}

// A read-only input file, checked to be the regular file of the size the plan was made with.
// O_NONBLOCK: a path swapped for a FIFO since it was stat'ed must not block the open.
class input_file {
 public:
  input_file(const std::filesystem::path& p, std::uint64_t expected) : path_(p) {
    int fd = -1;
    do {
      fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) input_fail("cannot read input file", p, "open", errno);
    fd_ = descriptor(fd);  // owned from here: closed also when a check below throws
    struct stat st {};
    if (::fstat(fd, &st) != 0) input_fail("cannot read input file", p, "fstat", errno);
    if (!S_ISREG(st.st_mode)) input_fail("input is not a regular file", p);
    if (static_cast<std::uint64_t>(st.st_size) != expected)
      changed(expected, static_cast<std::uint64_t>(st.st_size));
    bytes_ = io::fd_reader(fd, expected, p.string());
  }
  input_file(const input_file&) = delete;  // bytes_ reads fd_: neither copied nor moved
  input_file& operator=(const input_file&) = delete;

  // Reads through the byte-source seam; a read that ends early means the file changed size.
  void read(std::byte* dst, std::uint64_t n, std::uint64_t at, std::uint64_t expected) const {
    const io::read_outcome o = bytes_.try_read(dst, static_cast<std::size_t>(n), at);
    if (o.why == io::read_outcome::stop::failed)
      input_fail("cannot read input file", path_, o.api, o.err);
    if (o.why == io::read_outcome::stop::ended) changed(expected, o.at);
  }

 private:
  [[noreturn]] void changed(std::uint64_t expected, std::uint64_t now) const {
    input_fail("input file changed size while packing (" + std::to_string(expected) +
                   " bytes when listed, " + std::to_string(now) + " now)",
               path_);
  }
  struct close_fd {
    static constexpr int null = -1;
    void operator()(int fd) const noexcept { ::close(fd); }
  };
  using descriptor = unique_handle<int, close_fd>;
  std::filesystem::path path_;
  descriptor fd_;
  io::fd_reader bytes_;  // fd_, read
};

inline std::uint32_t crc32_of(const std::byte* p, std::uint64_t n) {
  return static_cast<std::uint32_t>(
      ::crc32_z(0, reinterpret_cast<const Bytef*>(p), static_cast<z_size_t>(n)));
}

// crc32 of A followed by B, from crc(A), crc(B) and |B|.
inline std::uint32_t crc32_join(std::uint32_t a, std::uint32_t b, std::uint64_t b_len) {
  return static_cast<std::uint32_t>(::crc32_combine(a, b, static_cast<z_off_t>(b_len)));
}

// Reads part [from, from + n) of record r into dst: the inputs of a pack (files, or the rows of
// an HDF5 dataset), read on the worker threads.
using read_part_fn =
    std::function<void(std::uint64_t r, std::byte* dst, std::uint64_t n, std::uint64_t from)>;

// Reads batch b (every record's part of its byte range) and, when the shard is chunked,
// compresses its chunks with `codec`: the last chunk of a shard is padded with zeros to the full
// chunk, as HDF5 stores edge chunks. Every codec is deterministic for a given level.
inline void fill_batch(const pack_plan& plan, const read_part_fn& read_part, std::size_t b,
                       const chunk_codec& codec, batch_data& out) {
  const batch_plan& bp = plan.batches[b];
  const shard_plan& s = plan.shards[bp.shard];
  const bool chunked = s.chunk > 0;
  const std::uint64_t n = bp.end - bp.begin;
  const std::uint64_t chunks = chunked ? (n + s.chunk - 1) / s.chunk : 0;
  const std::uint64_t padded = chunked ? chunks * s.chunk : n;
  out.bytes.resize(static_cast<std::size_t>(padded));
  if (padded > n) std::memset(out.bytes.data() + n, 0, static_cast<std::size_t>(padded - n));
  out.crc.assign(static_cast<std::size_t>(bp.end_record - bp.first_record), 0);
  out.chunks.resize(static_cast<std::size_t>(chunks));
  for (std::uint64_t r = bp.first_record; r < bp.end_record; ++r) {
    const std::uint64_t lo = std::max(plan.offset[r], bp.begin);
    const std::uint64_t hi = std::min(plan.end_of(r), bp.end);
    std::byte* dst = out.bytes.data() + (lo - bp.begin);
    read_part(r, dst, hi > lo ? hi - lo : 0, lo - plan.offset[r]);
    if (hi > lo) out.crc[r - bp.first_record] = crc32_of(dst, hi - lo);
  }
  for (std::size_t c = 0; c < out.chunks.size(); ++c)
    encode_chunk(codec, {out.bytes.data() + c * s.chunk, static_cast<std::size_t>(s.chunk)},
                 out.chunks[c]);
}

// Runs fill(k, data) for k = 0..count-1 on `threads` workers, at most `window` batches ahead of
// take(). take(k) must be called for k = 0, 1, 2, ... in order; it rethrows the batch's error.
// The destructor stops the workers (they finish the batch they are filling) and joins them.
class batch_pipeline {
 public:
  using fill_fn = std::function<void(std::size_t, batch_data&)>;

  batch_pipeline(std::size_t count, std::size_t threads, std::size_t window, fill_fn fill)
      : count_(count), window_(window < 1 ? 1 : window), fill_(std::move(fill)), ring_(window_) {
    for (std::size_t t = 0; t < threads; ++t)
      workers_.spawn([this](std::stop_token st) { work(st); });
  }
  batch_pipeline(const batch_pipeline&) = delete;
  batch_pipeline& operator=(const batch_pipeline&) = delete;
  ~batch_pipeline() {
    workers_.request_stop();
    {
      std::lock_guard<std::mutex> g(m_);
      stopping_ = true;
    }
    space_.notify_all();
    workers_.join();
  }

  // Gives a batch's buffers back for reuse by a later batch.
  void recycle(batch_data&& d) {
    d.error = nullptr;
    std::lock_guard<std::mutex> g(m_);
    if (spare_.size() < window_) spare_.push_back(std::move(d));
  }

  batch_data take(std::size_t k) {
    std::unique_lock<std::mutex> lk(m_);
    ready_.wait(lk, [&] { return ring_[k % window_].has_value(); });
    batch_data d = std::move(*ring_[k % window_]);
    ring_[k % window_].reset();
    taken_ = k + 1;
    lk.unlock();
    space_.notify_all();
    if (d.error) std::rethrow_exception(d.error);
    return d;
  }

 private:
  void work(std::stop_token st) {
    for (;;) {
      std::size_t k = 0;
      {
        std::unique_lock<std::mutex> lk(m_);
        space_.wait(lk, [&] { return stopping_ || next_ >= count_ || next_ < taken_ + window_; });
        if (stopping_ || st.stop_requested() || next_ >= count_) return;
        k = next_++;
      }
      batch_data d;
      {
        std::lock_guard<std::mutex> g(m_);
        if (!spare_.empty()) {
          d = std::move(spare_.back());
          spare_.pop_back();
        }
      }
      try {
        fill_(k, d);
      } catch (...) {
        d = batch_data{};
        d.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> g(m_);
        ring_[k % window_] = std::move(d);
      }
      ready_.notify_all();
    }
  }

  const std::size_t count_, window_;
  fill_fn fill_;
  std::mutex m_;
  std::condition_variable ready_, space_;
  std::vector<std::optional<batch_data>> ring_;
  std::vector<batch_data> spare_;
  std::size_t next_ = 0, taken_ = 0;
  bool stopping_ = false;
  thread_group workers_;  // last: joined before the members they use go away
};

}  // namespace gpufeed::detail::pack
