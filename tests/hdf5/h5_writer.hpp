// Test helper: writes HDF5 shards with the HDF5 C API directly (not with any gpufeed writer), so
// the reader is checked against files HDF5 itself laid out.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpufeed::test {

inline void h5_check(long long status, const char* what) {
  if (status < 0) throw std::runtime_error(std::string("test writer: ") + what + " failed");
}

// RAII hid_t for the writer.
struct h5_id {
  hid_t id = H5I_INVALID_HID;
  herr_t (*close)(hid_t) = nullptr;
  h5_id(hid_t i, herr_t (*c)(hid_t), const char* what) : id(i), close(c) { h5_check(i, what); }
  h5_id(const h5_id&) = delete;
  h5_id& operator=(const h5_id&) = delete;
  ~h5_id() {
    if (id >= 0) close(id);
  }
  operator hid_t() const { return id; }
};

struct dataset_spec {
  std::string name = "data";
  hid_t file_type = H5T_NATIVE_UINT8;  // stored type (e.g. H5T_STD_I32BE)
  hid_t mem_type = H5T_NATIVE_UINT8;   // type of the buffer passed in
  std::vector<hsize_t> dims;
  std::vector<hsize_t> chunk;  // empty: contiguous (or compact / external)
  bool unlimited = false;      // maxdims unlimited (lets chunks exceed the extent)
  int unlimited_dims = -1;     // with unlimited: only the first n dims (-1: all)
  bool early_alloc = false;    // H5D_ALLOC_TIME_EARLY (implicit index when unfiltered)
  // Filters, applied in this order when writing: fletcher32_first, shuffle, deflate,
  // fletcher32 (the order h5py uses, with an optional checksum before compression too).
  bool fletcher32_first = false;
  bool shuffle = false;
  int deflate = -1;  // level, -1 = none
  bool fletcher32 = false;
  bool nbit = false;
  bool scaleoffset = false;
  bool compact = false;
  std::string external;  // external raw file (absolute path)
  bool write = true;     // false: create only (storage never written)
  // Write only rows [0, write_rows) when set (the other chunks stay unallocated).
  hsize_t write_rows = 0;
};

// Writes one dataset into an open file. `data` holds the full extent in mem_type.
inline void write_dataset(hid_t file, const dataset_spec& s, const void* data) {
  const int rank = static_cast<int>(s.dims.size());
  std::vector<hsize_t> maxdims(s.dims);
  for (std::size_t d = 0; d < maxdims.size(); ++d)
    if (s.unlimited_dims < 0 || static_cast<int>(d) < s.unlimited_dims) maxdims[d] = H5S_UNLIMITED;
  h5_id space(H5Screate_simple(rank, s.dims.data(), s.unlimited ? maxdims.data() : nullptr),
              H5Sclose, "H5Screate_simple");
  h5_id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate");
  if (s.early_alloc) h5_check(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY), "alloc_time");
  if (!s.chunk.empty()) {
    h5_check(H5Pset_chunk(dcpl, rank, s.chunk.data()), "H5Pset_chunk");
    if (s.fletcher32_first) h5_check(H5Pset_fletcher32(dcpl), "H5Pset_fletcher32");
    if (s.shuffle) h5_check(H5Pset_shuffle(dcpl), "H5Pset_shuffle");
    if (s.nbit) h5_check(H5Pset_nbit(dcpl), "H5Pset_nbit");
    if (s.scaleoffset)
      h5_check(H5Pset_scaleoffset(dcpl, H5Z_SO_INT, H5Z_SO_INT_MINBITS_DEFAULT),
               "H5Pset_scaleoffset");
    if (s.deflate >= 0) h5_check(H5Pset_deflate(dcpl, static_cast<unsigned>(s.deflate)), "deflate");
    if (s.fletcher32) h5_check(H5Pset_fletcher32(dcpl), "H5Pset_fletcher32");
  } else if (s.compact) {
    h5_check(H5Pset_layout(dcpl, H5D_COMPACT), "H5Pset_layout");
  } else if (!s.external.empty()) {
    hsize_t n = H5Tget_size(s.file_type);
    for (auto d : s.dims) n *= d;
    h5_check(H5Pset_external(dcpl, s.external.c_str(), 0, n), "H5Pset_external");
  }
  h5_id dset(H5Dcreate2(file, s.name.c_str(), s.file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
             H5Dclose, "H5Dcreate2");
  if (!s.write || data == nullptr) return;
  if (s.write_rows) {
    std::vector<hsize_t> start(s.dims.size(), 0), count(s.dims);
    count[0] = s.write_rows;
    h5_id fspace(H5Dget_space(dset), H5Sclose, "H5Dget_space");
    h5_check(
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
        "H5Sselect_hyperslab");
    h5_id mspace(H5Screate_simple(rank, count.data(), nullptr), H5Sclose, "H5Screate_simple");
    h5_check(H5Dwrite(dset, s.mem_type, mspace, fspace, H5P_DEFAULT, data), "H5Dwrite");
    return;
  }
  h5_check(H5Dwrite(dset, s.mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "H5Dwrite");
}

// The blob layout's "offsets" dataset of n entries, contiguous, uint64 in memory; stored as
// file_type (the little-endian uint64 pack writes, unless a test stores another type).
inline dataset_spec offsets_spec(hsize_t n, hid_t file_type = H5T_STD_U64LE) {
  dataset_spec o;
  o.name = "offsets";
  o.file_type = file_type;
  o.mem_type = H5T_NATIVE_UINT64;
  o.dims = {n};
  return o;
}

// An HDF5 file created (truncated) for writing, closed on destruction.
class h5_file {
 public:
  // latest: the 1.10 file format (chunk indexes: single chunk, implicit, fixed array,
  // extensible array, v2 B-tree) instead of the default v1 B-tree everywhere.
  explicit h5_file(const std::filesystem::path& path, bool latest = false)
      : id_(create(path, latest), H5Fclose, "H5Fcreate") {}
  template <class T>
  void add(const dataset_spec& s, const std::vector<T>& data) {
    write_dataset(id_, s, data.data());
  }
  void add_raw(const dataset_spec& s, const void* data) { write_dataset(id_, s, data); }
  // The "offsets" dataset holding `offsets` (offsets_spec).
  void add_offsets(const std::vector<std::uint64_t>& offsets, hid_t file_type = H5T_STD_U64LE) {
    add(offsets_spec(offsets.size(), file_type), offsets);
  }
  hid_t id() const { return id_; }

 private:
  static hid_t create(const std::filesystem::path& path, bool latest) {
    h5_id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate");
    if (latest)
      h5_check(H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), "libver");
    return H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  }
  h5_id id_;
};

// File address and stored size of the chunk whose first element is `offset` (via
// H5Dget_chunk_info_by_coord), for corrupting it on purpose.
inline std::pair<std::uint64_t, std::uint64_t> chunk_extent(const std::filesystem::path& path,
                                                            const std::string& dataset,
                                                            std::vector<hsize_t> offset) {
  h5_id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "H5Fopen");
  h5_id d(H5Dopen2(f, dataset.c_str(), H5P_DEFAULT), H5Dclose, "H5Dopen2");
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  h5_check(H5Dget_chunk_info_by_coord(d, offset.data(), &mask, &addr, &size),
           "H5Dget_chunk_info_by_coord");
  return {addr, size};
}

// XORs the byte at `at` with `mask`.
inline void flip_byte(const std::filesystem::path& path, std::uint64_t at,
                      unsigned char mask = 0x5a) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(static_cast<unsigned char>(c) ^ mask);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(&c, 1);
  if (!f) throw std::runtime_error("flip_byte failed");
}

// Deterministic test values: element k of a dataset of T.
template <class T>
std::vector<T> pattern(std::size_t n, unsigned seed = 1) {
  std::vector<T> v(n);
  std::uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (std::size_t k = 0; k < n; ++k) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if constexpr (std::is_floating_point_v<T>)
      v[k] = static_cast<T>(static_cast<double>(x % 100000) / 7.0 - 5000.0);
    else
      v[k] = static_cast<T>(x);
  }
  return v;
}

}  // namespace gpufeed::test
