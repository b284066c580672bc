// gpufeed — a read-only POSIX file shared by many threads.
//
// pread(2) carries its own offset, so one descriptor serves every worker without a lock: this is
// what lets shard reads scale with threads where a library call under a global lock does not.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "gpufeed/error.hpp"

namespace gpufeed::detail {

// True for the errno values that mean no descriptor is left: the process's limit (EMFILE,
// `ulimit -n`) or the system's (ENFILE).
inline bool out_of_descriptors(int e) noexcept { return e == EMFILE || e == ENFILE; }

// `what`, prefixed with "too many open files" when errno e says no descriptor is left: that
// names the cause where a library's own message would blame the file.
inline std::string open_failure(int e, const std::string& what) {
  if (!out_of_descriptors(e)) return what;
  return "too many open files: " + what +
         (e == EMFILE ? " (EMFILE: the process's descriptor limit, ulimit -n, is reached: "
                      : " (ENFILE: the system's descriptor limit is reached: ") +
         "raise it, or keep fewer shards open: max_open_shards of hdf5_options or lmdb_options)";
}

// io_error "too many open files" naming `file` (api: what failed) when no descriptor can be had
// now, probed by duplicating `fd`; returns otherwise. For a library call that failed without
// saying why (HDF5's open), before its failure is blamed on the file.
inline void check_descriptors_left(int fd, const std::string& file, const char* api) {
  const int d = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (d >= 0) {
    ::close(d);
    return;
  }
  const int e = errno;
  if (out_of_descriptors(e)) throw io_error(open_failure(e, "cannot open the file"),
                                            os_call_context(file, api, e));
}

class posix_file {
 public:
  posix_file() noexcept = default;

  // Opens `path` read-only; io_error (errno in status) when the OS refuses, or when it is not a
  // regular file. Opened with O_NONBLOCK, so that a FIFO (or a device) is refused by the fstat
  // below instead of blocking open(2) for ever; the flag is cleared again for a regular file.
  explicit posix_file(const std::filesystem::path& path) : path_(path.string()) {
    do {
      fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    } while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) {
      const int e = errno;
      throw_errno(open_failure(e, "cannot open file"), "open", e);
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int e = errno;
      close();
      throw_errno("cannot stat file", "fstat", e);
    }
    if (!S_ISREG(st.st_mode)) {
      close();
      throw io_error("not a regular file", file_context(path_));
    }
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
      const int e = errno;
      close();
      throw_errno("cannot clear O_NONBLOCK", "fcntl", e);
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }

  posix_file(const posix_file&) = delete;
  posix_file& operator=(const posix_file&) = delete;
  posix_file(posix_file&& o) noexcept
      : fd_(std::exchange(o.fd_, -1)), size_(o.size_), dev_(o.dev_), ino_(o.ino_),
        path_(std::move(o.path_)) {}
  posix_file& operator=(posix_file&& o) noexcept {
    std::swap(fd_, o.fd_);
    std::swap(size_, o.size_);
    std::swap(dev_, o.dev_);
    std::swap(ino_, o.ino_);
    std::swap(path_, o.path_);
    return *this;
  }
  ~posix_file() { close(); }

  [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }

  // Closes the descriptor, keeping path and size: reopen() opens the same file again. The caller
  // makes sure no other thread uses the descriptor (shard_lru's pins).
  void close_descriptor() noexcept { close(); }

  // Opens the file again after close_descriptor(): io_error (errno in status; "too many open
  // files" for EMFILE/ENFILE) when the OS refuses, format_error when the path now names another
  // file or one of another size (replaced, truncated or grown since it was first opened: its
  // index no longer describes it).
  void reopen() {
    if (fd_ >= 0) return;
    int fd = -1;
    do {
      fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      const int e = errno;
      throw_errno(open_failure(e, "cannot reopen file"), "open", e);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int e = errno;
      ::close(fd);
      throw_errno("cannot stat file", "fstat", e);
    }
    if (st.st_dev != dev_ || st.st_ino != ino_ ||
        static_cast<std::uint64_t>(st.st_size) != size_) {
      ::close(fd);
      throw format_error("the file was replaced or changed size since it was first opened (" +
                             std::to_string(size_) + " bytes then, " +
                             std::to_string(st.st_size) + " now): reopen the source",
                         file_context(path_));
    }
    fd_ = fd;
  }
  [[nodiscard]] int fd() const noexcept { return fd_; }
  // The size when the file was opened.
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  // Reads exactly n bytes at `offset` (retrying short reads and EINTR). Thread-safe.
  // io_error naming the file (and `record` when given) on an OS error or an early end of file —
  // the file shrank after it was opened and indexed.
  void read_exact(void* dst, std::size_t n, std::uint64_t offset,
                  std::optional<std::uint64_t> record = std::nullopt) const {
    auto* p = static_cast<char*>(dst);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (got < 0) {
        if (errno == EINTR) continue;
        throw_errno("read failed", "pread", errno, record);
      }
      if (got == 0) {
        error_context ctx;
        ctx.file = path_;
        ctx.record = record;
        ctx.api = "pread";
        throw io_error("unexpected end of file at byte " + std::to_string(offset) +
                           " (the file was truncated after it was opened?)",
                       std::move(ctx));
      }
      p += got;
      n -= static_cast<std::size_t>(got);
      offset += static_cast<std::uint64_t>(got);
    }
  }

  // Reads the file's bytes from `offset` on into the buffers `parts`, in order, as one range
  // (preadv, at most 1024 buffers a call; short reads and EINTR retried; `parts` is consumed).
  // Errors as read_exact, naming `record` (the run's first record).
  void read_exact_v(std::span<iovec> parts, std::uint64_t offset,
                    std::optional<std::uint64_t> record = std::nullopt) const {
    constexpr std::size_t most = 1024;  // IOV_MAX on Linux
    while (!parts.empty() && parts.front().iov_len == 0) parts = parts.subspan(1);
    while (!parts.empty()) {
      const int n = static_cast<int>(parts.size() < most ? parts.size() : most);
      const ssize_t got = ::preadv(fd_, parts.data(), n, static_cast<off_t>(offset));
      if (got < 0) {
        if (errno == EINTR) continue;
        throw_errno("read failed", "preadv", errno, record);
      }
      if (got == 0) {
        error_context ctx;
        ctx.file = path_;
        ctx.record = record;
        ctx.api = "preadv";
        throw io_error("unexpected end of file at byte " + std::to_string(offset) +
                           " (the file was truncated after it was opened?)",
                       std::move(ctx));
      }
      offset += static_cast<std::uint64_t>(got);
      auto left = static_cast<std::size_t>(got);
      while (!parts.empty() && left >= parts.front().iov_len) {
        left -= parts.front().iov_len;
        parts = parts.subspan(1);
      }
      if (left) {  // a part read in part: the rest of it next
        parts.front().iov_base = static_cast<char*>(parts.front().iov_base) + left;
        parts.front().iov_len -= left;
      }
    }
  }

 private:
  void close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  [[noreturn]] void throw_errno(const std::string& what, const char* api, int e,
                                std::optional<std::uint64_t> record = std::nullopt) const {
    throw io_error(what, os_call_context(path_, api, e, record));
  }

  int fd_ = -1;
  std::uint64_t size_ = 0;
  dev_t dev_ = 0;  // identity of the file opened first (reopen() checks it)
  ino_t ino_ = 0;
  std::string path_;
};

}  // namespace gpufeed::detail
