// gpufeed — reading back what pack stores beside an HDF5 shard's records (part of
// gpufeed/pack/pack.hpp).
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/hdf5_source.hpp"

namespace gpufeed::detail::pack {

// Whether each of `names` is a link in the HDF5 file (checked without opening it as a shard).
// format_error when the file cannot be opened as HDF5.
inline std::vector<bool> hdf5_links_exist(const std::filesystem::path& file,
                                          const std::vector<std::string>& names) {
  namespace h = detail::hdf5;
  const std::string f = file.string();
  h::library_lock lock;
  h::handle id = h::checked<format_error>(H5Fopen(f.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose,
                                          "H5Fopen", "cannot open the HDF5 file", f);
  std::vector<bool> out;
  for (const std::string& n : names) {
    // H5Lexists fails (< 0) when an intermediate group is missing: that is "absent" too.
    const std::string first = n.substr(0, n.find('/'));
    bool ok = H5Lexists(id.get(), first.c_str(), H5P_DEFAULT) > 0;
    ok = ok && H5Lexists(id.get(), n.c_str(), H5P_DEFAULT) > 0;
    out.push_back(ok);
  }
  h::take_error_stack();
  return out;
}

inline std::vector<std::string> read_names(const std::filesystem::path& file) {
  hdf5_options o;
  o.dataset = "names/data";
  o.layout = hdf5_options::layout_kind::blob;
  const hdf5_source names(file, o);
  std::vector<std::string> out(static_cast<std::size_t>(names.size()));
  for (std::uint64_t i = 0; i < names.size(); ++i) {
    auto& s = out[static_cast<std::size_t>(i)];
    s.resize(names.record_size(i));
    names.read(i, std::as_writable_bytes(std::span<char>(s.data(), s.size())));
  }
  return out;
}

}  // namespace gpufeed::detail::pack
