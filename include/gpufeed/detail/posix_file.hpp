// gpufeed — a read-only POSIX file shared by many threads.
//
// pread(2) carries its own offset, so one descriptor serves every worker without a lock: this is
// what lets shard reads scale with threads where a library call under a global lock does not.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "gpufeed/error.hpp"

namespace gpufeed::detail {

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
    if (fd_ < 0) throw_errno("cannot open file", "open", errno);
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
  }

  posix_file(const posix_file&) = delete;
  posix_file& operator=(const posix_file&) = delete;
  posix_file(posix_file&& o) noexcept
      : fd_(std::exchange(o.fd_, -1)), size_(o.size_), path_(std::move(o.path_)) {}
  posix_file& operator=(posix_file&& o) noexcept {
    std::swap(fd_, o.fd_);
    std::swap(size_, o.size_);
    std::swap(path_, o.path_);
    return *this;
  }
  ~posix_file() { close(); }

  [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }
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
  std::string path_;
};

}  // namespace gpufeed::detail
