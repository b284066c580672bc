// gpufeed — pack(): writing one HDF5 shard in the blob layout hdf5_source detects (part of
// gpufeed/pack/pack.hpp).
//
//   data           uint8[bytes]   the records back to back; contiguous, or chunked + deflate
//   offsets        uint64[N+1]    record i = data[offsets[i] .. offsets[i+1])
//   labels         int64[N]       when the inputs have labels
//   names/data     uint8[..]      record names (UTF-8 as given), blob layout again, so
//   names/offsets  uint64[N+1]    hdf5_source(path, {"names/data"}) reads them
//
// Byte-identical output for identical input: object modification times are off (datasets,
// groups and the root group through the file creation list), nothing else HDF5 writes depends on
// the clock, and the data is written in one deterministic order by one thread. Deflate chunks are
// compressed by the reading workers (zlib compress2, exactly what HDF5's deflate filter does) and
// stored with H5Dwrite_chunk, so compression runs in parallel outside HDF5's global lock.
#pragma once

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/pack/detail/output.hpp"
#include "gpufeed/pack/detail/reading.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::pack {

// What a shard stores beside its data (all sized for its N records).
struct shard_meta {
  std::vector<std::uint64_t> offsets;       // N+1, local to the shard
  std::vector<std::int64_t> labels;         // N, or empty
  std::string names;                        // names back to back
  std::vector<std::uint64_t> name_offsets;  // N+1
};

class hdf5_shard_writer {
 public:
  // Creates `path` (which must not exist: H5F_ACC_EXCL) with every dataset; the data is written
  // by write() in stream order. chunk == 0: contiguous data; else chunked with deflate(level).
  hdf5_shard_writer(const std::filesystem::path& path, std::uint64_t bytes, std::uint64_t chunk,
                    int level, const shard_meta& meta)
      : path_(path.string()), chunk_(chunk) {
    namespace h = detail::hdf5;
    h::library_lock lock;
    h::handle fcpl = h::checked(H5Pcreate(H5P_FILE_CREATE), H5Pclose, "H5Pcreate", "fcpl", path_);
    h::check(H5Pset_obj_track_times(fcpl.get(), false), "H5Pset_obj_track_times",
             "cannot turn off time stamps", path_);
    file_ = h::checked<io_error>(H5Fcreate(path_.c_str(), H5F_ACC_EXCL, fcpl.get(), H5P_DEFAULT),
                                 H5Fclose, "H5Fcreate", "cannot create the HDF5 shard", path_);
    h::handle dcpl = creation_list();
    if (chunk) {
      const hsize_t c = chunk;
      h::check(H5Pset_chunk(dcpl.get(), 1, &c), "H5Pset_chunk", "cannot set the chunk", path_);
      h::check(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(level)), "H5Pset_deflate",
               "cannot set deflate", path_);
    }
    data_ = create(file_.get(), "data", H5T_STD_U8LE, bytes, dcpl.get());
    space_ = h::checked(H5Dget_space(data_.get()), H5Sclose, "H5Dget_space", "no dataspace", path_);
    add(file_.get(), "offsets", H5T_STD_U64LE, H5T_NATIVE_UINT64, meta.offsets.size(),
        meta.offsets.data());
    if (!meta.labels.empty())
      add(file_.get(), "labels", H5T_STD_I64LE, H5T_NATIVE_INT64, meta.labels.size(),
          meta.labels.data());
    h::handle gcpl = creation_list(H5P_GROUP_CREATE);
    h::handle names =
        h::checked(H5Gcreate2(file_.get(), "names", H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), H5Gclose,
                   "H5Gcreate2", "cannot create group 'names'", path_);
    add(names.get(), "data", H5T_STD_U8LE, H5T_NATIVE_UINT8, meta.names.size(), meta.names.data());
    add(names.get(), "offsets", H5T_STD_U64LE, H5T_NATIVE_UINT64, meta.name_offsets.size(),
        meta.name_offsets.data());
  }

  // Writes a batch that starts at byte `begin` of the data: its raw bytes, or its compressed
  // chunks (begin is then a multiple of the chunk size).
  void write(std::uint64_t begin, const batch_data& d) {
    namespace h = detail::hdf5;
    h::library_lock lock;
    if (chunk_) {
      hsize_t at = begin;
      for (const auto& c : d.chunks) {
        h::check(H5Dwrite_chunk(data_.get(), H5P_DEFAULT, 0, &at, c.size(), c.data()),
                 "H5Dwrite_chunk", "cannot write a chunk", path_);
        at += chunk_;
      }
      return;
    }
    if (d.bytes.empty()) return;
    const hsize_t start = begin, count = d.bytes.size();
    h::check(H5Sselect_hyperslab(space_.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr),
             "H5Sselect_hyperslab", "cannot select the batch", path_);
    h::handle mem =
        h::checked(H5Screate_simple(1, &count, nullptr), H5Sclose, "H5Screate_simple", "", path_);
    h::check(H5Dwrite(data_.get(), H5T_NATIVE_UINT8, mem.get(), space_.get(), H5P_DEFAULT,
                      d.bytes.data()),
             "H5Dwrite", "cannot write data", path_);
  }

  // Flushes and closes the file, then syncs it to disk.
  void finish() {
    namespace h = detail::hdf5;
    {
      h::library_lock lock;
      space_.reset();
      data_.reset();
      // The flush reports write failures; the close after it has nothing left to write.
      h::check(H5Fflush(file_.get(), H5F_SCOPE_LOCAL), "H5Fflush", "cannot flush the HDF5 shard",
               path_);
      file_.reset();
    }
    sync_file(path_);
  }

 private:
  detail::hdf5::handle creation_list(hid_t cls = H5P_DATASET_CREATE) const {
    namespace h = detail::hdf5;
    h::handle p = h::checked(H5Pcreate(cls), H5Pclose, "H5Pcreate", "property list", path_);
    h::check(H5Pset_obj_track_times(p.get(), false), "H5Pset_obj_track_times",
             "cannot turn off time stamps", path_);
    if (cls == H5P_DATASET_CREATE)
      h::check(H5Pset_fill_time(p.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time",
               "cannot turn off fill values", path_);
    return p;
  }

  detail::hdf5::handle create(hid_t where, const char* name, hid_t type, std::uint64_t n,
                              hid_t dcpl) const {
    namespace h = detail::hdf5;
    const hsize_t dims = n;
    h::handle space =
        h::checked(H5Screate_simple(1, &dims, nullptr), H5Sclose, "H5Screate_simple", "", path_);
    return h::checked(H5Dcreate2(where, name, type, space.get(), H5P_DEFAULT, dcpl, H5P_DEFAULT),
                      H5Dclose, "H5Dcreate2", std::string("cannot create dataset '") + name + "'",
                      path_);
  }

  void add(hid_t where, const char* name, hid_t type, hid_t mem, std::uint64_t n,
           const void* values) const {
    namespace h = detail::hdf5;
    h::handle dcpl = creation_list();
    h::handle d = create(where, name, type, n, dcpl.get());
    if (n)
      h::check(H5Dwrite(d.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), "H5Dwrite",
               std::string("cannot write dataset '") + name + "'", path_);
  }

  std::string path_;
  std::uint64_t chunk_;
  detail::hdf5::handle file_, data_, space_;
};

}  // namespace gpufeed::detail::pack
