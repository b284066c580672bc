// gpufeed inspect of an HDF5 file without the dataset to read (--dataset not given): the list of
// its datasets with shape, dtype, chunks and filters, and how to choose one.
#pragma once

#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/dataset_list.hpp"
#include "gpufeed/detail/io/posix_file.hpp"
#include "report.hpp"

namespace gpufeed::cli {

// The datasets of an HDF5 file (detail/hdf5/dataset_list.hpp); library_error when HDF5 cannot
// open it.
inline std::vector<detail::hdf5::dataset_listing> hdf5_datasets(const std::string& path) {
  namespace h = detail::hdf5;
  const h::library_lock lock;
  const h::error_silencer quiet;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) h::throw_hdf5("cannot open the HDF5 file", path, "H5Fopen", f);
  const h::handle file(f, H5Fclose);
  const detail::io::posix_file bytes(path);  // what the layout check reads
  return h::list_datasets(f, bytes);
}

inline bool has_dataset(const std::vector<detail::hdf5::dataset_listing>& list, const std::string& name) {
  const std::string want = name.starts_with("/") ? name.substr(1) : name;
  return std::any_of(list.begin(), list.end(), [&](const auto& d) { return d.name == want; });
}

// `gpufeed inspect FILE.h5` of a file without a "data" dataset: what it holds, and how to read
// one of them.
inline void print_datasets(const std::string& path, const std::vector<detail::hdf5::dataset_listing>& l,
                    bool as_json) {
  if (as_json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& d : l)
      list.push_back({{"name", d.name}, {"shape", d.shape}, {"dtype", d.dtype},
                      {"chunks", d.chunks}, {"filters", d.filters}});
    std::printf("%s\n", nlohmann::ordered_json{{"path", path}, {"datasets", list}}.dump(2).c_str());
    return;
  }
  std::printf("%s  HDF5, no dataset 'data'; %zu dataset%s:\n", one_line(path).c_str(), l.size(),
              l.size() == 1 ? "" : "s");
  for (const auto& d : l) {
    std::string shape, chunks, filters;
    for (const auto v : d.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(v);
    for (const auto v : d.chunks) chunks += (chunks.empty() ? "" : ", ") + std::to_string(v);
    for (const auto& f : d.filters) filters += (filters.empty() ? "" : ", ") + f;
    std::printf("  %-20s %-8s shape [%s]  chunks %s  filters %s\n", one_line(d.name).c_str(),
                d.dtype.c_str(), shape.c_str(), chunks.empty() ? "none" : ("[" + chunks + "]").c_str(),
                filters.empty() ? "none" : filters.c_str());
  }
  std::printf("read one with --dataset NAME (hdf5_options::dataset; labels: "
              "hdf5_options::label_dataset)\n");
}

}  // namespace gpufeed::cli
