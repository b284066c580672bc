// gpufeed — opening one HDF5 shard: the only place gpufeed's HDF5 reader calls HDF5 in bulk.
//
// Everything the hot path needs is learned here, once, under the library mutex: the layout
// (fixed rows or blob), the element type, the byte extent of a contiguous dataset or of every
// chunk, the filter pipeline, blob offsets and labels. Every extent is checked against the file
// size, so a damaged or truncated file fails here (or with io_error at read time if it shrinks
// later), never by returning garbage.
#pragma once

#include <hdf5.h>

#include <array>
#include <cstring>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/blob_index.hpp"
#include "gpufeed/detail/hdf5/chunk_index.hpp"
#include "gpufeed/detail/hdf5/dataset_list.hpp"
#include "gpufeed/detail/hdf5/declared_limits.hpp"
#include "gpufeed/detail/hdf5/dtype.hpp"
#include "gpufeed/detail/hdf5/index_driver.hpp"
#include "gpufeed/detail/hdf5/layout_precheck.hpp"
#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/detail/hdf5/remote_units.hpp"
#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/detail/hdf5/url_reader.hpp"
#include "gpufeed/detail/io/block_cache.hpp"
#include "gpufeed/detail/io/mapped_file.hpp"
#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/hdf5_options.hpp"

namespace gpufeed::detail::hdf5 {

// a * b, or format_error when it overflows 64 bits.
inline std::uint64_t mul_checked(std::uint64_t a, std::uint64_t b, const std::string& file) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) format_fail("dataset size overflows 64 bits", file);
  return r;
}

// Opens dataset `name` after checking its layout message (precheck_layout: a zero chunk dimension
// would crash libhdf5 inside H5Dopen2).
inline handle open_dataset(hid_t file_id, const io::byte_source& f, const std::string& name) {
  const std::string& file = f.name();
  precheck_layout(file_id, f, name);
  hid_t id = H5Dopen2(file_id, name.c_str(), H5P_DEFAULT);
  if (id < 0) {
    // Say what the file has and which setting chooses: a user's own file rarely calls its
    // dataset "data".
    const std::string message = "dataset '" + name + "' not found (or not a dataset)";
    rethrow_driver_fault(file, message + " (H5Dopen2)", std::nullopt);
    error_context ctx;
    ctx.file = file;
    ctx.api = "H5Dopen2";
    ctx.status = id;
    ctx.status_text = take_error_stack();  // before listing, which resets HDF5's error stack
    const std::string has = datasets_text(list_datasets(file_id, f));
    throw format_error(message + "; the file has: " + has +
                           ". Choose one with hdf5_options::dataset (gpufeed: --dataset NAME)",
                       std::move(ctx));
  }
  return handle(id, H5Dclose);
}

inline std::vector<std::uint64_t> dataset_dims(hid_t dset, const std::string& file,
                                               const std::string& name) {
  handle space = checked(H5Dget_space(dset), H5Sclose, "H5Dget_space", "no dataspace", file);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0)
    throw_hdf5("cannot read the extent of '" + name + "'", file, "H5Sget_simple_extent_ndims");
  if (rank == 0)
    format_fail("dataset '" + name + "' is a scalar; records are rows along dimension 0", file);
  std::array<hsize_t, max_rank> d{};
  check(H5Sget_simple_extent_dims(space.get(), d.data(), nullptr), "H5Sget_simple_extent_dims",
        "cannot read the extent of '" + name + "'", file);
  return std::vector<std::uint64_t>(d.begin(), d.begin() + rank);
}

// Reads a whole 1-D integer dataset converted to T (HDF5 converts from the stored type), after
// checking its declared size against the file's (check_declared).
template <class T>
std::vector<T> read_1d(hid_t dset, hid_t memtype, std::uint64_t n, const std::string& file,
                       const std::string& name, std::uint64_t file_size) {
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(n, std::uint64_t{sizeof(T)}, &bytes)) bytes = ~std::uint64_t{0};
  check_declared(bytes, file_size, file, name, std::to_string(n) + " entries");
  std::vector<T> v(static_cast<std::size_t>(n));
  if (n && H5Dread(dset, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0)
    throw_hdf5("cannot read dataset '" + name + "'", file, "H5Dread");
  return v;
}

// `name` with its last path component replaced by `leaf` ("a/data" -> "a/offsets").
inline std::string sibling(const std::string& name, const std::string& leaf) {
  const auto slash = name.rfind('/');
  return slash == std::string::npos ? leaf : name.substr(0, slash + 1) + leaf;
}

// A 1-D integer dataset with the given signedness requirement, or format_error.
inline std::uint64_t check_1d_integer(hid_t dset, const std::string& file, const std::string& name,
                                      bool must_be_unsigned) {
  handle t = checked(H5Dget_type(dset), H5Tclose, "H5Dget_type", "no datatype", file);
  const bool integer = H5Tget_class(t.get()) == H5T_INTEGER;
  if (!integer || (must_be_unsigned && H5Tget_sign(t.get()) != H5T_SGN_NONE))
    format_fail("dataset '" + name + "' must hold " +
                    (must_be_unsigned ? "unsigned integers (uint64)" : "integers"),
                file);
  const auto dims = dataset_dims(dset, file, name);
  if (dims.size() != 1) format_fail("dataset '" + name + "' must be one-dimensional", file);
  return dims[0];
}

inline std::vector<std::int64_t> read_labels(hid_t file_id, const std::string& name,
                                             std::uint64_t records, const io::byte_source& f) {
  const std::string& file = f.name();
  const std::uint64_t file_size = f.size();
  handle d = open_dataset(file_id, f, name);
  const std::uint64_t n = check_1d_integer(d.get(), file, name, false);
  if (n != records)
    format_fail("label dataset '" + name + "' has " + std::to_string(n) + " entries for " +
                    std::to_string(records) + " records",
                file);
  handle t = checked(H5Dget_type(d.get()), H5Tclose, "H5Dget_type", "no datatype", file);
  if (H5Tget_sign(t.get()) == H5T_SGN_NONE && H5Tget_size(t.get()) >= 8) {
    // uint64 labels above INT64_MAX cannot be widened to int64: refuse rather than clip.
    const auto u = read_1d<std::uint64_t>(d.get(), H5T_NATIVE_UINT64, n, file, name, file_size);
    std::vector<std::int64_t> v(u.size());
    for (std::size_t i = 0; i < u.size(); ++i) {
      if (u[i] > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        format_fail("label " + std::to_string(u[i]) + " does not fit in int64", file, i);
      v[i] = static_cast<std::int64_t>(u[i]);
    }
    return v;
  }
  return read_1d<std::int64_t>(d.get(), H5T_NATIVE_INT64, n, file, name, file_size);
}

// True when the HDF5 signature is at byte 0, 512, 1024, 2048, ... (where HDF5 looks for it).
// io_error when the file cannot be read.
inline bool has_hdf5_signature(const io::byte_source& f) {
  static constexpr char signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  for (std::uint64_t at = 0; at + 8 <= f.size(); at = at ? at * 2 : 512) {
    char got[8];
    f.read_exact(got, 8, at);
    if (std::memcmp(got, signature, 8) == 0) return true;
  }
  return false;
}

// io_error "too many open files" when no descriptor is left (see io::check_descriptors_left),
// probed with the shard's own descriptor when its reader is a posix_file (other readers hold
// none to probe with: HDF5's failure is then reported as it is).
inline void check_descriptors_left(const shard_index& s, const char* api) {
  if (const auto* f = s.file.as<io::posix_file>()) io::check_descriptors_left(f->fd(), s.path, api);
}

// Opens and indexes one shard, whose bytes gpufeed reads through `reader` (HDF5 itself reads
// the file at p through index_driver, for the metadata it indexes): the same bytes, named as p.
// through_reader: p is no file (a URL), and HDF5 reads through `reader` too, its metadata via a
// block_cache (whole blocks, few requests), the shard then named as the reader names it; such a
// shard cannot take the H5Dread fallback (unsupported_error: its HDF5 file would have to stay
// open on the reader).
// io_error when the file cannot be opened; format_error when it is not HDF5, lacks a dataset or
// has inconsistent contents; unsupported_error for a non-numeric dtype; library_error when HDF5
// fails otherwise.
inline shard_index open_shard(const std::filesystem::path& p, const hdf5_options& req,
                              io::owned_source reader, bool through_reader = false) {
  shard_index s;
  s.path = through_reader ? reader.name() : p.string();
  s.file = std::move(reader);
  const std::string& file = s.path;
  std::optional<io::block_cache> meta;  // declared before HDF5's handles: outlives them
  if (through_reader) meta.emplace(s.file.source());
  const io::byte_source& bytes = meta ? *meta : s.file.source();

  library_lock lock;
  clear_driver_fault();
  if (meta) {
    if (!has_hdf5_signature(bytes)) format_fail("not an HDF5 file", file);
  } else if (H5Fis_hdf5(file.c_str()) <= 0) {
    take_error_stack();
    check_descriptors_left(s, "H5Fis_hdf5");  // EMFILE: not the file's fault
    // H5Fis_hdf5 (through HDF5's own driver) says "no" for a read error too: look for the
    // signature ourselves, so an I/O error is an io_error and only a file without it is "not HDF5".
    if (has_hdf5_signature(bytes))
      throw io_error("HDF5 could not read the superblock of a file with an HDF5 signature",
                     file_context(file));
    format_fail("not an HDF5 file", file);
  }
  // Opened through index_driver, which reports chunk extents (see index_driver.hpp).
  const hid_t driver = index_driver::id();
  if (driver < 0) throw_hdf5("cannot register gpufeed's HDF5 file driver", file, "H5FDregister");
  handle fapl = checked(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate", "no fapl", file);
  check(H5Pset_driver(fapl.get(), driver, nullptr), "H5Pset_driver", "cannot set the driver", file);
  const hid_t fid_raw = [&] {
    const source_scope armed(meta ? driver_sources{&*meta, &s.file.source()} : driver_sources{});
    return H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get());
  }();
  if (fid_raw < 0) check_descriptors_left(s, "H5Fopen");
  handle fid = checked<format_error>(fid_raw, H5Fclose, "H5Fopen",
                                     "cannot open the HDF5 file (truncated or damaged?)", file);
  handle dset = open_dataset(fid.get(), bytes, req.dataset);
  const std::string what = "dataset '" + req.dataset + "'";
  const auto dims = dataset_dims(dset.get(), file, req.dataset);
  handle ftype = checked(H5Dget_type(dset.get()), H5Tclose, "H5Dget_type", "no datatype", file);
  dtype_info dt = describe_dtype(ftype.get(), file, what, req.keep_float16);
  s.rank = static_cast<int>(dims.size());
  for (int d = 0; d < s.rank; ++d) s.dims[d] = dims[d];
  s.element_size = dt.size;
  s.swap = dt.swap;

  // Layout: blob when asked, or (automatic) when a 1-D uint8 dataset has an "offsets" sibling.
  const std::string offsets_name = sibling(req.dataset, "offsets");
  const bool bytes_1d = s.rank == 1 && dt.name == "uint8";
  handle offs;
  if (req.layout == hdf5_options::layout_kind::blob) {
    offs = open_dataset(fid.get(), bytes, offsets_name);
  } else if (req.layout == hdf5_options::layout_kind::automatic && bytes_1d &&
             H5Lexists(fid.get(), offsets_name.c_str(), H5P_DEFAULT) > 0) {
    offs = open_dataset(fid.get(), bytes, offsets_name);
  }
  rethrow_driver_fault(file, "cannot look up '" + offsets_name + "'");
  take_error_stack();  // H5Lexists may leave entries for missing groups
  s.blob = offs.valid();
  if (s.blob) {
    if (!bytes_1d)
      format_fail("blob layout needs a one-dimensional uint8 " + what + ", found " +
                      std::to_string(s.rank) + "-D " + dt.name,
                  file);
    const std::uint64_t n = check_1d_integer(offs.get(), file, offsets_name, true);
    s.offsets = read_1d<std::uint64_t>(offs.get(), H5T_NATIVE_UINT64, n, file, offsets_name,
                                       s.file.size());
    if (auto bad = validate_blob_offsets(s.offsets, dims[0]))
      format_fail(bad->message, file, bad->record);
    s.records = s.offsets.size() - 1;
    for (std::uint64_t i = 0; i < s.records; ++i)
      s.max_record = std::max(s.max_record, s.record_bytes(i));
  } else {
    s.records = dims[0];
    std::uint64_t row = dt.size;
    for (int d = 1; d < s.rank; ++d) row = mul_checked(row, dims[d], file);
    mul_checked(row, dims[0], file);
    s.row_bytes = s.max_record = static_cast<std::size_t>(row);
  }
  check_declared(s.max_record, s.file.size(), file, req.dataset, "a record");
  // Labels: the dataset named, none for "", and when unset the one pack writes if it is there.
  std::string labels_name = req.label_dataset.value_or(std::string());
  if (!req.label_dataset && H5Lexists(fid.get(), pack_label_dataset, H5P_DEFAULT) > 0)
    labels_name = pack_label_dataset;
  rethrow_driver_fault(file, std::string("cannot look up '") + pack_label_dataset + "'");
  take_error_stack();
  if (!labels_name.empty())
    s.labels = read_labels(fid.get(), labels_name, s.records, bytes);

  hdf5_shard_info& desc = s.description;
  desc.path = through_reader ? std::filesystem::path(s.path) : p;
  desc.records = s.records;
  desc.layout = s.blob ? "blob" : "fixed";
  desc.label_dataset = labels_name;
  desc.dtype = dt.name;
  desc.shape = dims;
  desc.data_bytes = s.blob ? dims[0] : mul_checked(s.row_bytes, s.records, file);

  s.dataset_name = req.dataset;
  index_storage(s, dset.get(), dt, file);
  if (s.kind == read_kind::fallback && meta)
    throw unsupported_error("the shard needs HDF5's own reads (H5Dread fallback: " +
                                desc.fallback_reason +
                                "), which a shard named by a URL cannot take",
                            file_context(file));
  if (s.kind == read_kind::fallback) {
    s.h5file = std::move(fid);
    s.dataset = std::move(dset);
    s.memtype = std::move(dt.memtype);
    desc.read_path = hdf5_read_path::h5dread_fallback;
  } else {
    desc.read_path = (s.swap || !s.pipeline.empty()) ? hdf5_read_path::pread_decode
                                                     : hdf5_read_path::pread_raw;
  }
  return s;
}

// True when shard s is read through a memory map under req (hdf5_options::reads).
inline bool reads_mapped(const hdf5_options& req, const shard_index& s) noexcept {
  if (s.kind == read_kind::fallback) return false;
  switch (req.reads) {
    case hdf5_options::read_method::pread: return false;
    case hdf5_options::read_method::map: return true;
    case hdf5_options::read_method::automatic: break;
  }
  return io::map_faults_guarded && (s.kind == read_kind::contiguous || s.pipeline.empty());
}

// Opens and indexes one shard, read with pread (io::posix_file) or through a memory map of the
// same descriptor (io::mapped_file) as reads_mapped() says; a shard named by a URL through its
// HTTP(S) reader (url_reader.hpp: ranged GETs, never mapped), its contiguous data in remote
// units (remote_units.hpp). Errors as above and
// open_url_reader's; io_error when the map cannot be made.
inline shard_index open_shard(const std::filesystem::path& p, const hdf5_options& req) {
  if (is_shard_url(p)) {
    shard_index s = open_shard(p, req, open_url_reader(p.native(), req), true);
    fetch_in_units(s);
    return s;
  }
  shard_index s = open_shard(p, req, io::owned_source(std::make_unique<io::posix_file>(p)));
  if (reads_mapped(req, s)) {
    std::unique_ptr<io::posix_file> f = s.file.take<io::posix_file>();
    s.file = io::owned_source(std::make_unique<io::mapped_file>(std::move(*f)));
    s.description.mapped = true;
  }
  return s;
}

}  // namespace gpufeed::detail::hdf5
