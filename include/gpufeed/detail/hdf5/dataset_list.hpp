// gpufeed — the datasets of an HDF5 file, for people: what `gpufeed inspect FILE.h5` lists, and
// what the "dataset not found" error names so a user learns which one to choose
// (hdf5_options::dataset, --dataset).
#pragma once

#include <hdf5.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gpufeed/detail/codec/registry.hpp"
#include "gpufeed/detail/hdf5/dtype.hpp"
#include "gpufeed/detail/hdf5/layout_precheck.hpp"
#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/detail/io/byte_source.hpp"

namespace gpufeed::detail::hdf5 {

struct dataset_listing {
  std::string name;                  // full path inside the file, without the leading '/'
  std::vector<std::uint64_t> shape;  // empty for a scalar
  std::string dtype;                 // "float32", "uint8", ..., or the type class
  std::vector<std::uint64_t> chunks;  // empty unless chunked
  std::vector<std::string> filters;   // "deflate", "shuffle", "fletcher32", other filters' names
};

namespace list_detail {

inline std::string dtype_text(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t size = H5Tget_size(type);
  if (cls == H5T_INTEGER)
    return std::string(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") +
           std::to_string(size * 8);
  if (cls == H5T_FLOAT) return "float" + std::to_string(size * 8);
  return type_class_name(cls);
}

struct visit_state {
  hid_t file_id;  // H5Lvisit hands the callback the root group, which H5Fget_* refuse
  const io::byte_source* file;
  std::vector<dataset_listing> list;
};

// Called for every link (H5Lvisit: the same API whichever HDF5 version maps it); the hard
// links to datasets are listed. The object type comes from the header alone
// (H5Oget_info_by_name2, basic): opening the object would read its layout message, which
// precheck_layout must see first (a damaged one divides by zero inside libhdf5). A dataset
// whose layout fails the check is listed by name with dtype "damaged", not opened.
inline herr_t visit(hid_t group, const char* name, const H5L_info_t* info, void* out) {
  if (info->type != H5L_TYPE_HARD || !name || !*name) return 0;
  if (H5Oexists_by_name(group, name, H5P_DEFAULT) <= 0) return 0;
  H5O_info_t oinfo{};
  if (H5Oget_info_by_name2(group, name, &oinfo, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
      oinfo.type != H5O_TYPE_DATASET)
    return 0;
  auto& state = *static_cast<visit_state*>(out);
  auto& list = state.list;
  dataset_listing d;
  d.name = name;
  try {
    precheck_layout(state.file_id, *state.file, name);
  } catch (const error&) {
    d.dtype = "damaged";
    list.push_back(std::move(d));
    return 0;
  }
  const hid_t dset = H5Dopen2(group, name, H5P_DEFAULT);
  if (dset < 0) return 0;
  const handle dh(dset, H5Dclose);
  const handle space(H5Dget_space(dset), H5Sclose);
  if (space.get() >= 0) {
    const int rank = H5Sget_simple_extent_ndims(space.get());
    std::array<hsize_t, 32> dims{};
    if (rank > 0 && rank <= 32 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) >= 0)
      d.shape.assign(dims.begin(), dims.begin() + rank);
  }
  const handle type(H5Dget_type(dset), H5Tclose);
  if (type.get() >= 0) d.dtype = dtype_text(type.get());
  const handle plist(H5Dget_create_plist(dset), H5Pclose);
  if (plist.get() >= 0) {
    if (H5Pget_layout(plist.get()) == H5D_CHUNKED) {
      std::array<hsize_t, 32> c{};
      const int rank = H5Pget_chunk(plist.get(), 32, c.data());
      if (rank > 0) d.chunks.assign(c.begin(), c.begin() + rank);
    }
    const int n = H5Pget_nfilters(plist.get());
    for (int i = 0; i < n; ++i) {
      unsigned flags = 0, config = 0;
      std::size_t nelem = 0;
      char fname[64] = {0};
      const H5Z_filter_t id =
          H5Pget_filter2(plist.get(), static_cast<unsigned>(i), &flags, &nelem, nullptr,
                         sizeof fname, fname, &config);
      const codec::kind k = codec::kind_of_filter(id);
      if (codec::decoded(k))
        d.filters.push_back(codec::name_of(k));
      else
        d.filters.push_back(std::string(*fname ? fname : "filter") + " (" + std::to_string(id) +
                            ")");
    }
  }
  list.push_back(std::move(d));
  return 0;
}

}  // namespace list_detail

// Every dataset in the file, in name order (groups walked). Best effort: what HDF5 cannot
// describe is left out. `f` is the same file, read by precheck_layout. The caller holds a
// library_lock.
inline std::vector<dataset_listing> list_datasets(hid_t file_id, const io::byte_source& f) {
  list_detail::visit_state state{file_id, &f, {}};
  error_silencer quiet;
  H5Lvisit(file_id, H5_INDEX_NAME, H5_ITER_INC, list_detail::visit, &state);
  return std::move(state.list);
}

// "x (20000 x 64 float32), y (20000 int64)": for error messages; "none" when empty.
inline std::string datasets_text(const std::vector<dataset_listing>& list) {
  std::string s;
  for (std::size_t i = 0; i < list.size() && i < 12; ++i) {
    if (list[i].dtype == "damaged") {
      s += (s.empty() ? "" : ", ") + list[i].name + " (damaged layout)";
      continue;
    }
    std::string shape;
    for (const auto d : list[i].shape) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
    s += (s.empty() ? "" : ", ") + list[i].name + " (" + (shape.empty() ? "scalar" : shape) + " " +
         list[i].dtype + ")";
  }
  if (list.size() > 12) s += ", ...";
  return s.empty() ? "none" : s;
}

}  // namespace gpufeed::detail::hdf5
