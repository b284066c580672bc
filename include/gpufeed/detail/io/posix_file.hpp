// gpufeed — today's byte source: a read-only POSIX file read with pread(2), shared by many threads.
//
// pread carries its own offset, so one descriptor serves every worker without a lock: this is
// what lets shard reads scale with threads where a library call under a global lock does not.
// fd_reader reads a descriptor someone else owns (LMDB's, HDF5 file driver's); posix_file owns
// its own (opens, closes and reopens it). The checks of a read (short reads, EINTR, truncation,
// errors) are byte_source's, not repeated here.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>

#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::io {

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

// pread(2) / preadv(2) on a descriptor this object does not own; errors name `name`.
class fd_reader : public byte_source {
 public:
  fd_reader() noexcept = default;
  fd_reader(int fd, std::uint64_t size, std::string name) noexcept
      : fd_(fd), size_(size), name_(std::move(name)) {}

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] std::uint64_t size() const noexcept override { return size_; }
  [[nodiscard]] const std::string& name() const noexcept override { return name_; }

  // posix_fadvise(WILLNEED): the kernel starts fetching the extent in the background.
  void will_need(std::uint64_t offset, std::uint64_t bytes) const noexcept override {
    (void)::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes),
                          POSIX_FADV_WILLNEED);
  }

 protected:
  read_attempt read_some(void* dst, std::size_t n, std::uint64_t offset) const noexcept override {
    const ssize_t got = ::pread(fd_, dst, n, static_cast<off_t>(offset));
    if (got < 0) return {0, errno};
    return {static_cast<std::size_t>(got), 0};
  }
  read_attempt read_some_scatter(const iovec* parts, std::size_t count,
                                 std::uint64_t offset) const noexcept override {
    const ssize_t got = ::preadv(fd_, parts, static_cast<int>(count), static_cast<off_t>(offset));
    if (got < 0) return {0, errno};
    return {static_cast<std::size_t>(got), 0};
  }
  [[nodiscard]] const char* api(bool scatter) const noexcept override {
    return scatter ? "preadv" : "pread";
  }

  int fd_ = -1;
  std::uint64_t size_ = 0;  // when opened
  std::string name_;
};

// A read-only regular file that owns its descriptor: today's shard reader.
class posix_file final : public fd_reader {
 public:
  posix_file() noexcept = default;

  // Opens `path` read-only; io_error (errno in status; `cannot_open` says what failed, "too many
  // open files" first for EMFILE/ENFILE) when the OS refuses, or when it is not a regular file.
  // Opened with O_NONBLOCK, so that a FIFO (or a device) is refused by the fstat below instead
  // of blocking open(2) for ever; the flag is cleared again for a regular file.
  explicit posix_file(const std::filesystem::path& path,
                      const std::string& cannot_open = "cannot open file") {
    name_ = path.string();
    do {
      fd_ = ::open(name_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    } while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) {
      const int e = errno;
      throw_errno(open_failure(e, cannot_open), "open", e);
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int e = errno;
      close();
      throw_errno("cannot stat file", "fstat", e);
    }
    if (!S_ISREG(st.st_mode)) {
      close();
      throw io_error("not a regular file", file_context(name_));
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
      : fd_reader(std::exchange(o.fd_, -1), o.size_, std::move(o.name_)), dev_(o.dev_),
        ino_(o.ino_) {}
  posix_file& operator=(posix_file&& o) noexcept {
    std::swap(fd_, o.fd_);
    std::swap(size_, o.size_);
    std::swap(dev_, o.dev_);
    std::swap(ino_, o.ino_);
    std::swap(name_, o.name_);
    return *this;
  }
  ~posix_file() override { close(); }

  [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }

  // Closes the descriptor, keeping path and size: reopen() opens the same file again. The caller
  // makes sure no other thread uses the descriptor (shard_lru's pins).
  void close() noexcept override {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Opens the file again after close(): io_error (errno in status; "too many open files" for
  // EMFILE/ENFILE) when the OS refuses, format_error when the path now names another file or
  // one of another size (replaced, truncated or grown since it was first opened: its index no
  // longer describes it).
  void reopen() override {
    if (fd_ >= 0) return;
    int fd = -1;
    do {
      fd = ::open(name_.c_str(), O_RDONLY | O_CLOEXEC);
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
                         file_context(name_));
    }
    fd_ = fd;
  }

 private:
  [[noreturn]] void throw_errno(const std::string& what, const char* api, int e) const {
    throw io_error(what, os_call_context(name_, api, e));
  }

  dev_t dev_ = 0;  // identity of the file opened first (reopen() checks it)
  ino_t ino_ = 0;
};

}  // namespace gpufeed::detail::io
