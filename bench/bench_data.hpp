// gpufeed-bench: the data sets — generated once into --data-dir, reused while their stamp matches.
//
// Every format holds the same bytes: record i is fill_record(i), a pure function of i, so the
// naive loader's one-file-per-record directory, the HDF5 files and the LMDB environment of one
// record size agree byte for byte, and any delivered record can be checked without a copy.
//   hdf5          uint8 dataset "data" of shape (N, record_bytes), contiguous
//   hdf5-deflate  the same, chunked (rows per chunk so a chunk is ~1 MiB) + deflate level 1
//   lmdb          one raw value per record, keyed "%010llu" (key order = record order)
//   files         the naive loader's directory: record i in "%010llu.rec", for the first
//                 min(N, --naive-files) records
// A stamp file beside each data set names its parameters; a data set whose stamp is missing or
// different is written again (the stamp is written last, so an interrupted write is redone).
#pragma once

#include <fcntl.h>
#include <hdf5.h>
#include <lmdb.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

namespace fs = std::filesystem;

[[noreturn]] inline void fail(const std::string& what) { throw std::runtime_error(what); }

inline std::uint64_t splitmix64(std::uint64_t& s) noexcept {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Record i's bytes: 32-byte blocks, each random (with probability 100/256) or a run of one
// byte, so deflate level 1 gets about 2:1 — like image data, not like noise. Generates at
// several GB/s per core.
inline void fill_record(std::uint64_t i, std::span<std::byte> out) noexcept {
  std::uint64_t s = i * 0x2545f4914f6cdd1dull + 0x1234567;
  for (std::size_t at = 0; at < out.size(); at += 32) {
    const std::uint64_t r = splitmix64(s);
    const std::size_t n = std::min<std::size_t>(32, out.size() - at);
    if ((r & 0xff) < 100) {
      for (std::size_t k = 0; k < n; k += 8) {
        const std::uint64_t v = splitmix64(s);
        std::memcpy(out.data() + at + k, &v, std::min<std::size_t>(8, n - k));
      }
    } else {
      std::memset(out.data() + at, static_cast<int>((r >> 8) & 0xff), n);
    }
  }
}

// True when bytes hold exactly record i.
inline bool record_matches(std::uint64_t i, std::span<const std::byte> bytes) {
  std::vector<std::byte> want(bytes.size());
  fill_record(i, want);
  return std::equal(want.begin(), want.end(), bytes.begin());
}

enum class format { hdf5, hdf5_deflate, lmdb };

inline const char* format_name(format f) {
  switch (f) {
    case format::hdf5: return "hdf5";
    case format::hdf5_deflate: return "hdf5-deflate";
    case format::lmdb: return "lmdb";
  }
  return "?";
}

inline std::string size_name(std::size_t bytes) {
  if (bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

struct dataset {
  format fmt = format::hdf5;
  std::size_t record_bytes = 0;
  std::uint64_t records = 0;
  std::uint64_t chunk_rows = 0;  // hdf5-deflate only
  fs::path path;                 // .h5 file, or the LMDB environment's directory
  // hdf5 only: how the source reads it, when not automatic ("pread", "map": hdf5_options::reads)
  std::string reads;
  // The format as results name it: "hdf5-pread" for hdf5 read with pread, and so on.
  [[nodiscard]] std::string label() const {
    return std::string(format_name(fmt)) + (reads.empty() ? "" : "-" + reads);
  }
  [[nodiscard]] std::string name() const { return label() + "/" + size_name(record_bytes); }
  [[nodiscard]] std::string stamp() const {
    std::ostringstream o;
    o << "gpufeed-bench data v1 format=" << format_name(fmt) << " records=" << records
      << " record_bytes=" << record_bytes << " chunk_rows=" << chunk_rows << "\n";
    return o.str();
  }
};

struct file_set {  // the naive loader's one file per record
  std::size_t record_bytes = 0;
  std::uint64_t files = 0;
  fs::path dir;
  [[nodiscard]] fs::path file(std::uint64_t i) const {
    char name[32];
    std::snprintf(name, sizeof name, "%010llu.rec", static_cast<unsigned long long>(i));
    return dir / name;
  }
  [[nodiscard]] std::string stamp() const {
    return "gpufeed-bench files v1 files=" + std::to_string(files) +
           " record_bytes=" + std::to_string(record_bytes) + "\n";
  }
};

// Rows per chunk so a chunk is about 1 MiB (at least one row).
inline std::uint64_t chunk_rows_for(std::size_t record_bytes) {
  return std::max<std::uint64_t>(1, (std::uint64_t{1} << 20) / record_bytes);
}

// Beside the data set (a file or a directory): "<path>.stamp".
inline fs::path stamp_path(const fs::path& p) { return fs::path(p.string() + ".stamp"); }
inline bool stamp_matches(const fs::path& p, const std::string& want) {
  std::ifstream in(stamp_path(p));
  if (!in || !fs::exists(p)) return false;
  std::stringstream s;
  s << in.rdbuf();
  return s.str() == want;
}
inline void write_stamp(const fs::path& p, const std::string& text) {
  std::ofstream out(stamp_path(p));
  out << text;
  if (!out.flush()) fail("cannot write " + stamp_path(p).string());
}

// Rows written per call: ~8 MiB, a multiple of the chunk rows (so chunks are written whole).
inline std::uint64_t slab_rows(std::size_t record_bytes, std::uint64_t chunk_rows) {
  const std::uint64_t rows = std::max<std::uint64_t>(1, (std::uint64_t{8} << 20) / record_bytes);
  const std::uint64_t unit = std::max<std::uint64_t>(1, chunk_rows);
  return std::max(unit, rows / unit * unit);
}

inline void fill_rows(std::uint64_t first, std::uint64_t rows, std::size_t record_bytes,
                      std::vector<std::byte>& buf) {
  buf.resize(rows * record_bytes);
  for (std::uint64_t r = 0; r < rows; ++r)
    fill_record(first + r, std::span<std::byte>(buf).subspan(r * record_bytes, record_bytes));
}

namespace detail {
struct h5_closer {
  herr_t (*close)(hid_t);
  hid_t id;
  ~h5_closer() {
    if (id >= 0) close(id);
  }
};
inline hid_t h5_check(hid_t id, const char* what, const fs::path& p) {
  if (id < 0) fail(std::string(what) + " failed for " + p.string());
  return id;
}
}  // namespace detail

inline void write_hdf5(const dataset& d) {
  using detail::h5_check;
  fs::remove(stamp_path(d.path));
  const fs::path& p = d.path;
  detail::h5_closer f{H5Fclose, h5_check(H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT,
                                                   H5P_DEFAULT), "H5Fcreate", p)};
  const hsize_t dims[2] = {d.records, d.record_bytes};
  detail::h5_closer space{H5Sclose, h5_check(H5Screate_simple(2, dims, nullptr), "H5Screate", p)};
  detail::h5_closer dcpl{H5Pclose, h5_check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate", p)};
  if (d.fmt == format::hdf5_deflate) {
    const hsize_t chunk[2] = {std::min<hsize_t>(d.chunk_rows, d.records), d.record_bytes};
    if (H5Pset_chunk(dcpl.id, 2, chunk) < 0 || H5Pset_deflate(dcpl.id, 1) < 0)
      fail("H5Pset_chunk/H5Pset_deflate failed for " + p.string());
  }
  detail::h5_closer ds{H5Dclose, h5_check(H5Dcreate2(f.id, "data", H5T_STD_U8LE, space.id,
                                                     H5P_DEFAULT, dcpl.id, H5P_DEFAULT),
                                          "H5Dcreate2", p)};
  const std::uint64_t step = slab_rows(d.record_bytes, d.chunk_rows);
  std::vector<std::byte> buf;
  for (std::uint64_t r = 0; r < d.records; r += step) {
    const std::uint64_t rows = std::min(step, d.records - r);
    fill_rows(r, rows, d.record_bytes, buf);
    const hsize_t start[2] = {r, 0}, count[2] = {rows, d.record_bytes};
    detail::h5_closer fsp{H5Sclose, h5_check(H5Dget_space(ds.id), "H5Dget_space", p)};
    detail::h5_closer msp{H5Sclose, h5_check(H5Screate_simple(2, count, nullptr), "H5Screate", p)};
    if (H5Sselect_hyperslab(fsp.id, H5S_SELECT_SET, start, nullptr, count, nullptr) < 0 ||
        H5Dwrite(ds.id, H5T_NATIVE_UINT8, msp.id, fsp.id, H5P_DEFAULT, buf.data()) < 0)
      fail("H5Dwrite failed for " + p.string());
  }
}

inline void lmdb_check(int rc, const char* what, const fs::path& p) {
  if (rc != 0) fail(std::string(what) + " failed for " + p.string() + ": " + mdb_strerror(rc));
}

inline void write_lmdb(const dataset& d) {
  fs::remove(stamp_path(d.path));
  fs::remove_all(d.path);
  fs::create_directories(d.path);
  // Values above ~2 KiB go to overflow pages (whole 4 KiB pages); leave room for both cases.
  const std::uint64_t per_record = d.record_bytes + d.record_bytes / 2 + 4096 + 64;
  MDB_env* raw = nullptr;
  lmdb_check(mdb_env_create(&raw), "mdb_env_create", d.path);
  std::unique_ptr<MDB_env, void (*)(MDB_env*)> env(raw, mdb_env_close);
  lmdb_check(mdb_env_set_mapsize(env.get(), d.records * per_record + (std::size_t{64} << 20)),
             "mdb_env_set_mapsize", d.path);
  lmdb_check(mdb_env_open(env.get(), d.path.c_str(), MDB_NOSYNC, 0644), "mdb_env_open", d.path);
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  lmdb_check(mdb_txn_begin(env.get(), nullptr, 0, &txn), "mdb_txn_begin", d.path);
  lmdb_check(mdb_dbi_open(txn, nullptr, 0, &dbi), "mdb_dbi_open", d.path);
  std::vector<std::byte> value(d.record_bytes);
  std::uint64_t in_txn = 0;
  for (std::uint64_t i = 0; i < d.records; ++i) {
    char key[24];
    const int len = std::snprintf(key, sizeof key, "%010llu", static_cast<unsigned long long>(i));
    fill_record(i, value);
    MDB_val k{static_cast<std::size_t>(len), key}, v{value.size(), value.data()};
    const int rc = mdb_put(txn, dbi, &k, &v, MDB_APPEND);
    if (rc != 0) mdb_txn_abort(txn);
    lmdb_check(rc, "mdb_put", d.path);
    in_txn += d.record_bytes;
    if (in_txn >= (std::uint64_t{256} << 20) || i + 1 == d.records) {
      lmdb_check(mdb_txn_commit(txn), "mdb_txn_commit", d.path);
      txn = nullptr;
      in_txn = 0;
      if (i + 1 < d.records)
        lmdb_check(mdb_txn_begin(env.get(), nullptr, 0, &txn), "mdb_txn_begin", d.path);
    }
  }
  lmdb_check(mdb_env_sync(env.get(), 1), "mdb_env_sync", d.path);
  fs::remove(d.path / "lock.mdb");  // readers open it MDB_NOLOCK (immutable)
}

inline void write_files(const file_set& s) {
  fs::remove(stamp_path(s.dir));
  fs::remove_all(s.dir);
  fs::create_directories(s.dir);
  std::vector<std::byte> buf(s.record_bytes);
  for (std::uint64_t i = 0; i < s.files; ++i) {
    fill_record(i, buf);
    const fs::path p = s.file(i);
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) fail("cannot create " + p.string());
    const bool ok = ::write(fd, buf.data(), buf.size()) == static_cast<ssize_t>(buf.size());
    ::close(fd);
    if (!ok) fail("cannot write " + p.string());
  }
}

// Writes d unless its stamp matches. Returns true when it wrote.
inline bool ensure(const dataset& d) {
  if (stamp_matches(d.path, d.stamp())) return false;
  fs::create_directories(d.path.parent_path());
  if (d.fmt == format::lmdb)
    write_lmdb(d);
  else
    write_hdf5(d);
  write_stamp(d.path, d.stamp());
  return true;
}
inline bool ensure(const file_set& s) {
  if (stamp_matches(s.dir, s.stamp())) return false;
  write_files(s);
  write_stamp(s.dir, s.stamp());
  return true;
}

// Regular files of a data set (one .h5, LMDB's data.mdb, or the naive loader's files).
inline std::vector<fs::path> data_files(const fs::path& p) {
  std::vector<fs::path> out;
  if (!fs::is_directory(p)) return {p};
  for (const auto& e : fs::directory_iterator(p))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Reads every file once so timed runs read from the page cache. Returns the bytes read.
inline std::uint64_t warm_page_cache(const fs::path& p) {
  std::vector<char> buf(std::size_t{4} << 20);
  std::uint64_t total = 0;
  for (const auto& f : data_files(p)) {
    const int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) fail("cannot open " + f.string());
    ssize_t n = 0;
    while ((n = ::read(fd, buf.data(), buf.size())) > 0) total += static_cast<std::uint64_t>(n);
    ::close(fd);
  }
  return total;
}

// Fraction of the data set's pages in the page cache (mincore), sampled over at most 64 files.
inline double resident_fraction(const fs::path& p) {
  const auto files = data_files(p);
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::uint64_t pages = 0, resident = 0;
  const std::size_t stride = std::max<std::size_t>(1, files.size() / 64);
  for (std::size_t k = 0; k < files.size(); k += stride) {
    const int fd = ::open(files[k].c_str(), O_RDONLY);
    if (fd < 0) continue;
    struct stat st{};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      const auto len = static_cast<std::size_t>(st.st_size);
      void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) {
        std::vector<unsigned char> v((len + page - 1) / page);
        if (::mincore(m, len, v.data()) == 0) {
          pages += v.size();
          for (unsigned char c : v) resident += c & 1u;
        }
        ::munmap(m, len);
      }
    }
    ::close(fd);
  }
  return pages ? static_cast<double>(resident) / static_cast<double>(pages) : 0.0;
}

}  // namespace bench
