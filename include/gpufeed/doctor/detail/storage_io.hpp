// The storage check's measurements: list the files under a path, ask the kernel how much of them
// sits in the page cache, read them sequentially (O_DIRECT for the storage rate, buffered for
// the page-cache rate), and read /proc/meminfo. Failures throw io_error naming the file.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "gpufeed/error.hpp"

namespace gpufeed::detail::doctor {

struct data_file {
  std::filesystem::path path;
  std::uint64_t size = 0;
};

struct file_listing {
  std::vector<data_file> files;  // non-empty regular files, sorted by path
  std::uint64_t total_bytes = 0;
  bool truncated = false;        // stopped after max_files
};

// The non-empty regular files at p (p itself if it is a file), recursively, without following
// directory symlinks (no loops), skipping directories this user cannot list.
inline file_listing list_data_files(const std::filesystem::path& p, std::size_t max_files) {
  namespace fs = std::filesystem;
  file_listing out;
  auto take = [&out](const fs::path& f, std::uint64_t size) {
    if (size == 0) return;
    out.files.push_back({f, size});
    out.total_bytes += size;
  };
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) {
    take(p, fs::file_size(p, ec));
    return out;
  }
  fs::recursive_directory_iterator it(p, fs::directory_options::skip_permission_denied, ec), end;
  if (ec) throw io_error("cannot list the data directory", os_call_context(p.string(), "opendir", ec));
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    std::error_code fec;
    if (!it->is_regular_file(fec)) continue;
    if (out.files.size() >= max_files) {
      out.truncated = true;
      break;
    }
    const auto size = it->file_size(fec);
    if (!fec) take(it->path(), size);
  }
  std::sort(out.files.begin(), out.files.end(),
            [](const data_file& a, const data_file& b) { return a.path < b.path; });
  return out;
}

// Owns a file descriptor.
class unique_fd {
 public:
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const noexcept { return fd_; }

 private:
  int fd_;
};

// Bytes of the first max_bytes of files that are resident in the page cache (mincore over a
// read-only mapping, 1 GiB at a time; nothing is read or faulted in). scanned receives the
// bytes examined. Files that cannot be mapped count as not resident.
inline std::uint64_t resident_bytes(const std::vector<data_file>& files, std::uint64_t max_bytes,
                                    std::uint64_t& scanned) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  constexpr std::uint64_t window = std::uint64_t{1} << 30;
  std::vector<unsigned char> vec(window / page);
  std::uint64_t resident = 0;
  scanned = 0;
  for (const auto& f : files) {
    if (scanned >= max_bytes) break;
    const std::uint64_t len = std::min(f.size, max_bytes - scanned);
    scanned += len;
    unique_fd fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) continue;
    for (std::uint64_t off = 0; off < len; off += window) {
      const std::uint64_t n = std::min(window, len - off);
      void* m = ::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd.get(), static_cast<off_t>(off));
      if (m == MAP_FAILED) break;
      if (::mincore(m, n, vec.data()) == 0) {
        const std::uint64_t pages = (n + page - 1) / page;
        for (std::uint64_t i = 0; i < pages; ++i)
          if (vec[i] & 1u) resident += std::min(page, n - i * page);
      }
      ::munmap(m, n);
    }
  }
  return resident;
}

struct read_pass {
  std::uint64_t bytes = 0;
  double seconds = 0.0;
  bool direct = false;        // every byte was read with O_DIRECT
  std::string direct_refusal; // why O_DIRECT was not used, when it was asked for and refused
  [[nodiscard]] double gbps() const noexcept {
    return bytes ? static_cast<double>(bytes) / std::max(seconds, 1e-9) / 1e9 : 0.0;
  }
};

// Reads the first max_bytes of files in order, block bytes per read() call, into one buffer, and
// times it. With direct, files are opened with O_DIRECT so the bytes come from the device, not
// the page cache (and are not added to it); a file system that refuses O_DIRECT (EINVAL at open
// or at the first read: tmpfs, some FUSE and network file systems) is read buffered instead and
// the refusal is recorded. block is rounded up to 4 KiB, the strictest O_DIRECT alignment.
inline read_pass read_sequential(const std::vector<data_file>& files, std::uint64_t max_bytes,
                                 std::size_t block, bool direct) {
  constexpr std::size_t align = 4096;
  block = std::max<std::size_t>(align, (block + align - 1) / align * align);
  if (max_bytes < block) block = static_cast<std::size_t>(std::max<std::uint64_t>(align, (max_bytes + align - 1) / align * align));
  std::unique_ptr<void, decltype(&std::free)> buf(std::aligned_alloc(align, block), &std::free);
  if (!buf) throw std::bad_alloc();
  std::memset(buf.get(), 0, block);  // fault the buffer in now, not inside the timing
  read_pass r;
  r.direct = direct;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& f : files) {
    if (r.bytes >= max_bytes) break;
    int flags = O_RDONLY | O_CLOEXEC;
    bool file_direct = r.direct;
    int fd = ::open(f.path.c_str(), flags | (file_direct ? O_DIRECT : 0));
    if (fd < 0 && file_direct && errno == EINVAL) {
      r.direct = file_direct = false;
      r.direct_refusal = "open(O_DIRECT) returned EINVAL for " + f.path.string();
      fd = ::open(f.path.c_str(), flags);
    }
    if (fd < 0) throw io_error("cannot open a data file to measure its read rate", os_call_context(f.path.string(), "open", errno));
    auto owner = std::make_unique<unique_fd>(fd);
    for (;;) {
      const std::uint64_t left = max_bytes - r.bytes;
      if (left == 0) break;
      const std::size_t want = left >= block ? block : static_cast<std::size_t>((left + align - 1) / align * align);
      const ssize_t got = ::read(owner->get(), buf.get(), want);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && file_direct && errno == EINVAL) {
        // Accepted at open, refused at read: restart this file buffered, where it stood.
        const off_t at = ::lseek(owner->get(), 0, SEEK_CUR);
        r.direct = file_direct = false;
        r.direct_refusal = "read() with O_DIRECT returned EINVAL for " + f.path.string();
        owner = std::make_unique<unique_fd>(::open(f.path.c_str(), flags));
        if (owner->get() < 0) throw io_error("cannot reopen a data file", os_call_context(f.path.string(), "open", errno));
        if (::lseek(owner->get(), at < 0 ? 0 : at, SEEK_SET) < 0)
          throw io_error("cannot seek in a data file", os_call_context(f.path.string(), "lseek", errno));
        continue;
      }
      if (got < 0) throw io_error("cannot read a data file", os_call_context(f.path.string(), "read", errno));
      if (got == 0) break;
      r.bytes += std::min<std::uint64_t>(static_cast<std::uint64_t>(got), left);
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

struct meminfo {
  std::uint64_t total = 0, available = 0, cached = 0;  // bytes; 0 when not reported
};

// MemTotal, MemAvailable and Cached from a /proc/meminfo-format file; zeros if unreadable.
inline meminfo read_meminfo(const std::filesystem::path& file) {
  meminfo m;
  std::ifstream in(file);
  std::string key;
  std::uint64_t kib = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    if (!(ls >> key >> kib)) continue;
    if (key == "MemTotal:") m.total = kib * 1024;
    else if (key == "MemAvailable:") m.available = kib * 1024;
    else if (key == "Cached:") m.cached = kib * 1024;
  }
  return m;
}

// A name for the file system holding p ("ext4", "nfs", ...), or its magic number in hex.
inline std::string filesystem_name(const std::filesystem::path& p) {
  struct ::statfs s{};
  if (::statfs(p.c_str(), &s) != 0) return "unknown";
  const auto magic = static_cast<unsigned long>(s.f_type);
  struct known { unsigned long magic; const char* name; };
  static constexpr known table[] = {
      {0xEF53, "ext2/3/4"},     {0x58465342, "xfs"},        {0x9123683E, "btrfs"},
      {0x01021994, "tmpfs"},    {0x794C7630, "overlayfs"},  {0x6969, "nfs"},
      {0x2FC12FC1, "zfs"},      {0x0BD00BD0, "lustre"},     {0x47504653, "gpfs"},
      {0x65735546, "fuse"},     {0xFF534D42, "cifs"},       {0xFE534D42, "smb2"},
      {0x00C36400, "ceph"},     {0x73717368, "squashfs"},   {0x01021997, "9p"},
      {0x5346544E, "ntfs"},     {0x4D44, "vfat"},           {0xF2F52010, "f2fs"},
  };
  for (const auto& k : table)
    if (k.magic == magic) return k.name;
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%lx", magic);
  return std::string("unknown (statfs magic ") + hex + ")";
}

}  // namespace gpufeed::detail::doctor
