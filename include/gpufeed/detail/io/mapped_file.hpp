// gpufeed — a shard file read through a read-only shared memory map: a byte_source whose read is
// a memcpy, no system call.
//
// Why: a pread(2) of a small record is a system call per record, which bounds small records to
// what the kernel's entry and page-cache lookup allow per core, however little the loader adds.
// From a map the same read is a copy out of the page cache (a minor page fault the first time
// the process touches a page, then nothing). hdf5_options::reads chooses it per shard.
//
// Truncation while mapped (another process shrinks the file) is an error, never a crash or
// silent zeros, in two parts:
//  - a page wholly past the new end raises SIGBUS when touched: every copy runs under
//    map_fault_guard.hpp, and a fault ends the read where it began, as pread's early end does
//    (byte_source turns that into an io_error naming file, record and byte);
//  - the bytes of the new last page past the new end read as zeros, without a fault. No check
//    before a copy closes that race, so a mapped file's reads are confirmed after the fact:
//    size_now() (one fstat) after a group of reads. A read of bytes below the size an fstat
//    finds after it finished read the file's bytes (a truncation shrinks the size before it
//    drops or zeroes a page). hdf5's source_reader confirms after each read, or, for the
//    loader, after each task (confirming_reader, source.hpp).
#pragma once

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/detail/io/map_fault_guard.hpp"
#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::io {

class mapped_file final : public byte_source {
 public:
  // Maps the opened `file` whole (its size at open). io_error naming it when mmap fails.
  explicit mapped_file(posix_file file) : file_(std::move(file)) { map(); }

  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file() override { unmap(); }

  [[nodiscard]] std::uint64_t size() const noexcept override { return file_.size(); }
  [[nodiscard]] const std::string& name() const noexcept override { return file_.name(); }

  // posix_fadvise(WILLNEED) on the descriptor: the kernel fills the page cache the map reads.
  void will_need(std::uint64_t offset, std::uint64_t bytes) const noexcept override {
    file_.will_need(offset, bytes);
  }
  // Unmaps and closes; reopen() opens the same file again (format_error when it was replaced or
  // changed size since: posix_file::reopen) and maps it.
  void close() noexcept override {
    unmap();
    file_.close();
  }
  void reopen() override {
    if (base_ || file_.fd() >= 0) return;
    file_.reopen();
    try {
      map();
    } catch (...) {
      file_.close();
      throw;
    }
  }

  // The file's size now (one fstat; the file must be open): when smaller than size(), bytes
  // read from the map at or past it since it shrank may be zeros (shrunk_error). io_error
  // naming the file when fstat fails.
  [[nodiscard]] std::uint64_t size_now() const {
    struct stat st {};
    if (::fstat(file_.fd(), &st) != 0) {
      const int e = errno;
      throw io_error("cannot stat the mapped file", os_call_context(name(), "fstat", e));
    }
    return static_cast<std::uint64_t>(st.st_size);
  }

  // The io_error of a read of `record` that reached byte `end` of the file, which now has
  // `now` bytes (fewer than when mapped).
  [[nodiscard]] io_error shrunk_error(std::uint64_t now, std::uint64_t end,
                                      std::optional<std::uint64_t> record) const {
    error_context ctx;
    ctx.file = name();
    ctx.record = record;
    ctx.api = "mmap";
    return io_error("the file was truncated while it was read through its memory map (" +
                        std::to_string(size()) + " bytes when mapped, " + std::to_string(now) +
                        " now; the read reached byte " + std::to_string(end) +
                        "): its bytes may be zeros",
                    std::move(ctx));
  }

 protected:
  read_attempt read_some(void* dst, std::size_t n, std::uint64_t offset) const noexcept override {
    if (offset >= size()) return {0, 0};
    const std::size_t take = clip(n, offset);
    const std::byte* from = base_ + offset;
    if (guard_map_reads(base_, size(), [&] { std::memcpy(dst, from, take); }))
      return {0, 0};  // SIGBUS: the file ends before this read's bytes now
    return {take, 0};
  }
  read_attempt read_some_scatter(const iovec* parts, std::size_t count,
                                 std::uint64_t offset) const noexcept override {
    if (offset >= size()) return {0, 0};
    std::size_t got = 0;
    const std::byte* from = base_ + offset;
    const std::size_t room = clip(~std::size_t{0}, offset);
    const void* fault = guard_map_reads(base_, size(), [&] {
      for (std::size_t i = 0; i < count && got < room; ++i) {
        const std::size_t take = parts[i].iov_len < room - got ? parts[i].iov_len : room - got;
        std::memcpy(parts[i].iov_base, from + got, take);
        got += take;
      }
    });
    if (fault) return {0, 0};
    return {got, 0};
  }
  [[nodiscard]] const char* api(bool /*scatter*/) const noexcept override { return "mmap"; }

 private:
  // n, or the bytes left from `offset` to the end when fewer.
  [[nodiscard]] std::size_t clip(std::size_t n, std::uint64_t offset) const noexcept {
    const std::uint64_t left = size() - offset;
    return left < n ? static_cast<std::size_t>(left) : n;
  }

  void map() {
    if (size() == 0) return;  // nothing to map: every read is past the end
    void* p =
        ::mmap(nullptr, static_cast<std::size_t>(size()), PROT_READ, MAP_SHARED, file_.fd(), 0);
    if (p == MAP_FAILED) {
      const int e = errno;  // before name()'s copy may allocate
      throw io_error("cannot map the file", os_call_context(name(), "mmap", e));
    }
    base_ = static_cast<const std::byte*>(p);
  }
  void unmap() noexcept {
    if (base_) ::munmap(const_cast<std::byte*>(base_), static_cast<std::size_t>(size()));
    base_ = nullptr;
  }

  posix_file file_;                  // the descriptor: reopen, will_need, size_now
  const std::byte* base_ = nullptr;  // the map of [0, size()), null while closed or empty
};

}  // namespace gpufeed::detail::io
