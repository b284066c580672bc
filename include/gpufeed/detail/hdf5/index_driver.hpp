// gpufeed — a read-only POSIX virtual file driver for HDF5 that can report, instead of perform,
// the raw-data read HDF5 makes for one chunk. It is how gpufeed learns chunk addresses in
// O(log n) each with libhdf5 1.10.8.
//
// Why: 1.10.8's H5Dget_chunk_info_by_coord and H5Dget_chunk_info find a chunk by iterating over
// every chunk of the dataset (measured: 10 000 chunks index in 1.6 s, 100 000 in 440 s), and
// H5Dchunk_iter only exists from 1.12.3/1.14. H5Dread_chunk, however, finds its chunk through
// the index lookup (B-tree search, or O(1) for the fixed/extensible-array indexes) and then makes
// exactly one raw-data (H5FD_MEM_DRAW) read of the chunk's stored bytes through the file driver.
// This driver, while a capture is armed on the calling thread, records that read's address and
// size and skips it — so indexing costs a lookup per chunk and reads no chunk data. At all other
// times it is a plain pread driver (like sec2), so the same open file serves H5Dread fallbacks.
//
// Unlike sec2 it zero-fills only past the size the file had when it was opened: an end of file
// before that means the file shrank, and the read fails (recorded in driver_fault, with a failed
// pread's errno, so gpufeed reports an io_error naming the file rather than HDF5's generic error).
//
// A shard that is not a local file (a URL) is opened through byte sources instead of a path:
// while a source_scope is armed on the calling thread, the driver's open takes that scope's
// sources rather than opening the name it is given, and reads HDF5's metadata through one (a
// block_cache over the object: few requests) and raw data through the other (the object
// itself). Such a file holds no descriptor: it is never locked, and two such files are the same
// file when they read the same raw source.
//
// Its reads go through the byte-source seam (io::fd_reader over the driver's own descriptor:
// try_read, which continues short reads, retries EINTR and tells a failure from an early end),
// not a pread loop of its own. It keeps its own descriptor (HDF5 opens, locks, compares and
// closes files through the driver's callbacks, by name) and answers HDF5 with a status, not an
// exception, so it reads with try_read and records the outcome instead of read_exact.
#pragma once

#include <fcntl.h>
#include <hdf5.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/detail/io/posix_file.hpp"

namespace gpufeed::detail::hdf5 {

// What the driver saw while a capture was armed.
struct raw_read_capture {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  int reads = 0;  // raw-data reads seen; indexing expects exactly one per H5Dread_chunk
};

// Armed capture of the calling thread (HDF5 calls the driver on the caller's thread).
inline thread_local raw_read_capture* armed_capture = nullptr;

// The sources a file opened on this thread reads instead of its path (see the top): metadata
// through `meta`, raw data through `raw`; both outlive the HDF5 file opened with them.
struct driver_sources {
  const io::byte_source* meta = nullptr;
  const io::byte_source* raw = nullptr;
};
inline thread_local driver_sources armed_sources{};

class index_driver {
 public:
  // The registered driver's id: registered on first use, and again if HDF5 was closed and
  // reinitialised meanwhile. The caller holds a library_lock.
  static hid_t id() {
    static hid_t driver = H5I_INVALID_HID;
    if (driver < 0 || H5Iis_valid(driver) <= 0) driver = H5FDregister(&driver_class());
    return driver;
  }

 private:
  struct file {
    H5FD_t base;  // must be first: HDF5 sees a pointer to this
    int fd = -1;
    haddr_t eoa = 0;
    haddr_t eof = 0;
    dev_t device = 0;
    ino_t inode = 0;
    driver_sources sources;  // set: the file is read through them, fd is -1
  };
  static file* self(H5FD_t* f) noexcept { return reinterpret_cast<file*>(f); }
  static const file* self(const H5FD_t* f) noexcept { return reinterpret_cast<const file*>(f); }

  static constexpr haddr_t max_address = (haddr_t{1} << 63) - 1;

  static H5FD_t* open(const char* name, unsigned flags, hid_t, haddr_t maxaddr) noexcept {
    if ((flags & (H5F_ACC_RDWR | H5F_ACC_CREAT | H5F_ACC_TRUNC | H5F_ACC_EXCL)) != 0)
      return nullptr;
    if (!name || !*name || maxaddr == 0 || maxaddr == HADDR_UNDEF || maxaddr > max_address)
      return nullptr;
    if (armed_sources.raw) {
      auto* f = new (std::nothrow) file{};
      if (!f) return nullptr;
      f->sources = armed_sources;
      f->eof = static_cast<haddr_t>(f->sources.raw->size());
      return &f->base;
    }
    const int fd = ::open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return nullptr;
    }
    auto* f = new (std::nothrow) file{};
    if (!f) {
      ::close(fd);
      return nullptr;
    }
    f->fd = fd;
    f->eof = static_cast<haddr_t>(st.st_size);
    f->device = st.st_dev;
    f->inode = st.st_ino;
    return &f->base;
  }

  static herr_t close(H5FD_t* h) noexcept {
    file* f = self(h);
    const int rc = f->fd >= 0 ? ::close(f->fd) : 0;
    delete f;
    return rc == 0 ? 0 : -1;
  }

  static int cmp(const H5FD_t* a, const H5FD_t* b) noexcept {
    const file* x = self(a);
    const file* y = self(b);
    if (x->sources.raw != y->sources.raw) return x->sources.raw < y->sources.raw ? -1 : 1;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->inode != y->inode) return x->inode < y->inode ? -1 : 1;
    return 0;
  }

  static herr_t query(const H5FD_t*, unsigned long* flags) noexcept {
    if (flags) *flags = H5FD_FEAT_DATA_SIEVE;  // no metadata accumulator: reads go straight through
    return 0;
  }

  static haddr_t get_eoa(const H5FD_t* h, H5FD_mem_t) noexcept { return self(h)->eoa; }
  static herr_t set_eoa(H5FD_t* h, H5FD_mem_t, haddr_t addr) noexcept {
    self(h)->eoa = addr;
    return 0;
  }
  static haddr_t get_eof(const H5FD_t* h, H5FD_mem_t) noexcept { return self(h)->eof; }
  static herr_t get_handle(H5FD_t* h, hid_t, void** handle) noexcept {
    if (!handle) return -1;
    *handle = &self(h)->fd;
    return 0;
  }

  static herr_t read(H5FD_t* h, H5FD_mem_t type, hid_t, haddr_t addr, std::size_t size,
                     void* buf) noexcept {
    if (type == H5FD_MEM_DRAW && armed_capture) {  // report the chunk's extent, read nothing
      armed_capture->address = addr;
      armed_capture->size = size;
      ++armed_capture->reads;
      return 0;
    }
    file* f = self(h);
    if (addr == HADDR_UNDEF || addr > max_address || size > max_address - addr) return -1;
    const io::read_outcome r = read_bytes(*f, type, buf, size, addr);
    if (r.ok()) return 0;
    // Ended before the size at open: the file shrank after it was opened, never invent zeros.
    if (r.why == io::read_outcome::stop::failed || r.at < f->eof) {
      driver_fault = driver_fault_record{true, r};
      return -1;
    }
    const auto done = static_cast<std::size_t>(r.at - addr);
    std::memset(static_cast<char*>(buf) + done, 0, size - done);  // past the end at open: zeros, as sec2
    return 0;
  }

  // Through the armed sources, or pread on the file's own descriptor.
  static io::read_outcome read_bytes(const file& f, H5FD_mem_t type, void* buf, std::size_t size,
                                     haddr_t addr) noexcept {
    if (f.sources.raw) {
      const io::byte_source& s = type == H5FD_MEM_DRAW ? *f.sources.raw : *f.sources.meta;
      return s.try_read(buf, size, addr);
    }
    const io::fd_reader bytes(f.fd, f.eof, std::string());  // errors are named by the caller
    return bytes.try_read(buf, size, addr);
  }

  static herr_t write(H5FD_t*, H5FD_mem_t, hid_t, haddr_t, std::size_t, const void*) noexcept {
    return -1;  // read-only
  }

  // A shared lock, as sec2 takes for read-only opens (refused while a writer holds the file);
  // file systems without flock are accepted.
  static herr_t lock(H5FD_t* h, hbool_t rw) noexcept {
    if (self(h)->fd < 0) return 0;  // read through sources: nothing to lock
    if (::flock(self(h)->fd, (rw ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) return 0;
    return (errno == ENOSYS || errno == EOPNOTSUPP) ? 0 : -1;
  }
  static herr_t unlock(H5FD_t* h) noexcept {
    if (self(h)->fd < 0) return 0;
    if (::flock(self(h)->fd, LOCK_UN) == 0) return 0;
    return (errno == ENOSYS || errno == EOPNOTSUPP) ? 0 : -1;
  }

  static const H5FD_class_t& driver_class() {
    static const H5FD_class_t c = [] {
      H5FD_class_t k;
      std::memset(&k, 0, sizeof k);
      k.name = "gpufeed_index";
      k.maxaddr = max_address;
      k.fc_degree = H5F_CLOSE_WEAK;
      k.open = &index_driver::open;
      k.close = &index_driver::close;
      k.cmp = &index_driver::cmp;
      k.query = &index_driver::query;
      k.get_eoa = &index_driver::get_eoa;
      k.set_eoa = &index_driver::set_eoa;
      k.get_eof = &index_driver::get_eof;
      k.get_handle = &index_driver::get_handle;
      k.read = &index_driver::read;
      k.write = &index_driver::write;
      k.lock = &index_driver::lock;
      k.unlock = &index_driver::unlock;
      const H5FD_mem_t map[H5FD_MEM_NTYPES] = H5FD_FLMAP_DICHOTOMY;
      for (int t = 0; t < H5FD_MEM_NTYPES; ++t) k.fl_map[t] = map[t];
      return k;
    }();
    return c;
  }
};

// Arms a capture on this thread for one H5Dread_chunk call.
class capture_scope {
 public:
  explicit capture_scope(raw_read_capture& c) noexcept : previous_(armed_capture) {
    c = raw_read_capture{};
    armed_capture = &c;
  }
  capture_scope(const capture_scope&) = delete;
  capture_scope& operator=(const capture_scope&) = delete;
  ~capture_scope() { armed_capture = previous_; }

 private:
  raw_read_capture* previous_;
};

// Arms `sources` on this thread for the HDF5 file opens made in its lifetime (index_driver's
// open then reads through them instead of the path).
class source_scope {
 public:
  explicit source_scope(driver_sources sources) noexcept : previous_(armed_sources) {
    armed_sources = sources;
  }
  source_scope(const source_scope&) = delete;
  source_scope& operator=(const source_scope&) = delete;
  ~source_scope() { armed_sources = previous_; }

 private:
  driver_sources previous_;
};

}  // namespace gpufeed::detail::hdf5
