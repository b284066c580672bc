// gpufeed — pack(): writing one HDF5 shard in a layout hdf5_source detects (part of
// gpufeed/pack/pack.hpp).
//
//   data           blob layout (files): uint8[bytes], the records back to back;
//                  fixed layout (pack_from_hdf5): the source's native type, shape (N, d1..dk)
//                  contiguous, or chunked and compressed (codecs.hpp), chunks of whole rows
//   offsets        uint64[N+1]    blob only: record i = data[offsets[i] .. offsets[i+1])
//   labels         int64[N]       when the inputs have labels
//   names/data     uint8[..]      record names (UTF-8 as given), blob layout again, so
//   names/offsets  uint64[N+1]    hdf5_source(path, {"names/data"}) reads them
//
// Byte-identical output for identical input: object modification times are off (datasets,
// groups and the root group through the file creation list), nothing else HDF5 writes depends on
// the clock, and the data is written in one deterministic order by one thread. Chunks are
// compressed by the reading workers (codecs.hpp) and stored with H5Dwrite_chunk, so compression
// runs in parallel outside HDF5's global lock, and needs no HDF5 plugin: the pipeline records
// the filter id and cd_values the plugins (and hdf5_source) read, with H5Z_FLAG_OPTIONAL as h5py
// sets for plugin filters. Where a plugin is installed HDF5 loads it for H5Dcreate; Bitshuffle's
// then fills in its own version in cd_values[0..1] and its name, so a shard's bytes depend on
// which bitshuffle plugin is installed (never its records).
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

#include "gpufeed/detail/codec/registry.hpp"
#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/pack/detail/codecs.hpp"
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

// The `data` dataset's type and shape. Blob: uint8 (type < 0), row empty. Fixed: type is a
// native HDF5 type (not owned), row the dims of one record (d1..dk), row_bytes its size.
struct data_shape {
  hid_t type = -1;
  std::vector<hsize_t> row;
  std::uint64_t row_bytes = 1;
  [[nodiscard]] bool fixed() const noexcept { return type >= 0; }
};

class hdf5_shard_writer {
 public:
  // Creates `path` (which must not exist: H5F_ACC_EXCL) with every dataset; the data is written
  // by write() in stream order. chunk == 0: contiguous data; else chunks of `chunk` bytes (whole
  // rows for the fixed layout), compressed with `codec`.
  hdf5_shard_writer(const std::filesystem::path& path, std::uint64_t bytes, std::uint64_t chunk,
                    const chunk_codec& codec, const shard_meta& meta, const data_shape& shape = {})
      : path_(path.string()), chunk_(chunk), row_bytes_(shape.row_bytes) {
    namespace h = detail::hdf5;
    h::library_lock lock;
    h::handle fcpl = h::checked(H5Pcreate(H5P_FILE_CREATE), H5Pclose, "H5Pcreate", "fcpl", path_);
    h::check(H5Pset_obj_track_times(fcpl.get(), false), "H5Pset_obj_track_times",
             "cannot turn off time stamps", path_);
    file_ = h::checked<io_error>(H5Fcreate(path_.c_str(), H5F_ACC_EXCL, fcpl.get(), H5P_DEFAULT),
                                 H5Fclose, "H5Fcreate", "cannot create the HDF5 shard", path_);
    h::handle dcpl = creation_list();
    dims_.assign(1, shape.fixed() ? bytes / shape.row_bytes : bytes);
    dims_.insert(dims_.end(), shape.row.begin(), shape.row.end());
    if (chunk) {
      std::vector<hsize_t> c = dims_;
      c[0] = shape.fixed() ? chunk / shape.row_bytes : chunk;
      h::check(H5Pset_chunk(dcpl.get(), static_cast<int>(c.size()), c.data()), "H5Pset_chunk",
               "cannot set the chunk", path_);
      set_filter(dcpl.get(), codec);
    }
    mem_type_ = shape.fixed() ? shape.type : H5T_NATIVE_UINT8;
    data_ = create(file_.get(), "data", shape.fixed() ? shape.type : H5T_STD_U8LE, dims_,
                   dcpl.get());
    if (chunk) check_filter(codec);
    space_ = h::checked(H5Dget_space(data_.get()), H5Sclose, "H5Dget_space", "no dataspace", path_);
    if (!meta.offsets.empty())
      add(file_.get(), "offsets", H5T_STD_U64LE, H5T_NATIVE_UINT64, meta.offsets.size(),
          meta.offsets.data());
    if (!meta.labels.empty())
      add(file_.get(), "labels", H5T_STD_I64LE, H5T_NATIVE_INT64, meta.labels.size(),
          meta.labels.data());
    if (meta.name_offsets.empty()) return;
    h::handle gcpl = creation_list(H5P_GROUP_CREATE);
    h::handle names =
        h::checked(H5Gcreate2(file_.get(), "names", H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), H5Gclose,
                   "H5Gcreate2", "cannot create group 'names'", path_);
    add(names.get(), "data", H5T_STD_U8LE, H5T_NATIVE_UINT8, meta.names.size(), meta.names.data());
    add(names.get(), "offsets", H5T_STD_U64LE, H5T_NATIVE_UINT64, meta.name_offsets.size(),
        meta.name_offsets.data());
  }

  // Writes a batch that starts at byte `begin` of the data: its raw bytes, or its compressed
  // chunks (begin is then a multiple of the chunk size). Fixed layout: begin and the batch's
  // size are whole rows.
  void write(std::uint64_t begin, const batch_data& d) {
    namespace h = detail::hdf5;
    h::library_lock lock;
    std::vector<hsize_t> at(dims_.size(), 0);
    if (chunk_) {
      at[0] = begin / row_bytes_;
      for (const auto& c : d.chunks) {
        h::check(H5Dwrite_chunk(data_.get(), H5P_DEFAULT, 0, at.data(), c.size(), c.data()),
                 "H5Dwrite_chunk", "cannot write a chunk", path_);
        at[0] += chunk_ / row_bytes_;
      }
      return;
    }
    if (d.bytes.empty()) return;
    std::vector<hsize_t> count = dims_;
    at[0] = begin / row_bytes_;
    count[0] = d.bytes.size() / row_bytes_;
    h::check(H5Sselect_hyperslab(space_.get(), H5S_SELECT_SET, at.data(), nullptr, count.data(),
                                 nullptr),
             "H5Sselect_hyperslab", "cannot select the batch", path_);
    h::handle mem =
        h::checked(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr),
                   H5Sclose, "H5Screate_simple", "", path_);
    h::check(H5Dwrite(data_.get(), mem_type_, mem.get(), space_.get(), H5P_DEFAULT, d.bytes.data()),
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

  // The filter of `codec` on dcpl (see the top of this file).
  void set_filter(hid_t dcpl, const chunk_codec& codec) const {
    namespace h = detail::hdf5;
    const auto set = [&](codec::kind k, std::vector<unsigned> cd) {
      const int id = codec::filter_id(k);
      h::check(H5Pset_filter(dcpl, id, H5Z_FLAG_OPTIONAL, cd.size(), cd.data()), "H5Pset_filter",
               "cannot set filter " + std::to_string(id), path_);
    };
    switch (codec.kind) {
      case codec::kind::none:
        return;
      case codec::kind::deflate:
        h::check(H5Pset_deflate(dcpl, static_cast<unsigned>(codec.level)), "H5Pset_deflate",
                 "cannot set deflate", path_);
        return;
      case codec::kind::lz4:
        return set(codec::kind::lz4, {0});
      case codec::kind::zstd:
        return set(codec::kind::zstd, {static_cast<unsigned>(codec.level)});
      case codec::kind::bitshuffle: {  // its LZ4 mode
        // A registered bitshuffle plugin's set_local prepends {major, minor, element size} to
        // what it is given: hand it the user's two values then, else all five.
        const htri_t avail = H5Zfilter_avail(codec::filter_id(codec::kind::bitshuffle));
        h::take_error_stack();
        const unsigned e = static_cast<unsigned>(codec.element_size);
        if (avail > 0) return set(codec::kind::bitshuffle, {0, codec::bitshuffle_mode::lz4});
        return set(codec::kind::bitshuffle, {0, 3, e, 0, codec::bitshuffle_mode::lz4});
      }
      default:
        throw library_error(std::string("pack writes no ") + codec::name_of(codec.kind) +
                                " filter",
                            file_context(path_));
    }
  }

  // library_error unless the created dataset's bitshuffle parameters are the ones its chunks use.
  void check_filter(const chunk_codec& codec) const {
    namespace h = detail::hdf5;
    if (codec.kind != codec::kind::bitshuffle) return;
    h::handle dcpl = h::checked(H5Dget_create_plist(data_.get()), H5Pclose, "H5Dget_create_plist",
                                "no creation property list", path_);
    unsigned flags = 0, cd[8] = {};
    std::size_t n = 8;
    h::check(H5Pget_filter_by_id2(dcpl.get(), codec::filter_id(codec::kind::bitshuffle), &flags,
                                  &n, cd, 0, nullptr, nullptr),
             "H5Pget_filter_by_id2", "cannot read back the bitshuffle filter", path_);
    if (n != 5 || cd[2] != codec.element_size || cd[3] != 0 || cd[4] != codec::bitshuffle_mode::lz4)
      throw library_error("the bitshuffle filter's parameters were changed at H5Dcreate",
                          file_context(path_));
  }

  detail::hdf5::handle create(hid_t where, const char* name, hid_t type, std::uint64_t n,
                              hid_t dcpl) const {
    return create(where, name, type, std::vector<hsize_t>{n}, dcpl);
  }

  detail::hdf5::handle create(hid_t where, const char* name, hid_t type,
                              const std::vector<hsize_t>& dims, hid_t dcpl) const {
    namespace h = detail::hdf5;
    h::handle space =
        h::checked(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
                   "H5Screate_simple", "", path_);
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
  std::uint64_t chunk_, row_bytes_;
  std::vector<hsize_t> dims_;
  hid_t mem_type_ = -1;
  detail::hdf5::handle file_, data_, space_;
};

}  // namespace gpufeed::detail::pack
