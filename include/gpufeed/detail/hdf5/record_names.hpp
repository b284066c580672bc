// gpufeed::detail::hdf5 — a record's input name from the names table `gpufeed pack` writes in
// each HDF5 shard (pack/detail/hdf5_writer.hpp):
//
//   names/data     uint8[..]     the names (UTF-8, as pack listed them) back to back
//   names/offsets  uint64[N+1]   record i's name = names/data[offsets[i] .. offsets[i+1])
//
// Read on demand, one record's name per call: the file is opened (read-only, HDF5's default
// driver), two offsets and the name's bytes are read, and the file is closed again. That costs
// an open, so it is for error paths (the loader names a failed record's input); nothing is held
// in memory and the read path never touches the table.
//
// The table is checked as far as one lookup reaches: both datasets one-dimensional unsigned
// integers, names/data of 1-byte elements, names/offsets exactly N+1 entries, the record's two
// offsets in order and within names/data, a name at most max_record_name bytes. A table that
// fails a check is a format_error naming the shard and record — never a read outside the
// datasets.
#pragma once

#include <hdf5.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/detail/hdf5/open_shard.hpp"
#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

// Longer names are refused as a damaged table (a path is at most PATH_MAX, 4096, on Linux).
inline constexpr std::uint64_t max_record_name = std::uint64_t{64} << 10;

// Reads entries [first, first + count) of a 1-D dataset converted to `memtype` into dst.
inline void read_1d_range(hid_t dset, hid_t memtype, std::uint64_t first, std::uint64_t count,
                          void* dst, const std::string& file, const std::string& name) {
  if (count == 0) return;
  handle space = checked(H5Dget_space(dset), H5Sclose, "H5Dget_space", "no dataspace", file);
  const hsize_t start[1] = {first}, n[1] = {count};
  check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, n, nullptr),
        "H5Sselect_hyperslab", "cannot select entries of '" + name + "'", file);
  handle mem = checked(H5Screate_simple(1, n, nullptr), H5Sclose, "H5Screate_simple", "", file);
  if (H5Dread(dset, memtype, mem.get(), space.get(), H5P_DEFAULT, dst) < 0)
    throw_hdf5<format_error>("cannot read dataset '" + name + "'", file, "H5Dread");
}

// Record `local`'s name in shard `path` of `records` records (global index `global`, for the
// errors); nullopt when the shard has no names table. format_error for a damaged table,
// io_error when the file cannot be opened.
inline std::optional<std::string> read_record_name(const std::filesystem::path& path,
                                                   std::uint64_t records, std::uint64_t local,
                                                   std::uint64_t global) {
  const io::posix_file f(path);
  const std::string& file = f.name();
  library_lock lock;
  handle fid = checked<format_error>(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose,
                                     "H5Fopen", "cannot open the HDF5 file to read record names",
                                     file);
  // H5Lexists fails (< 0) when "names" is no group: no table either.
  for (const char* link : {"names", "names/data", "names/offsets"}) {
    if (H5Lexists(fid.get(), link, H5P_DEFAULT) <= 0) {
      take_error_stack();
      return std::nullopt;
    }
  }
  const auto fail = [&](const std::string& why) {
    format_fail("the shard's record names table (names/data, names/offsets) is damaged: " + why,
                file, global);
  };
  handle offs = open_dataset(fid.get(), f, "names/offsets");
  const std::uint64_t n = check_1d_integer(offs.get(), file, "names/offsets", true);
  if (n != records + 1)
    fail("names/offsets has " + std::to_string(n) + " entries for " + std::to_string(records) +
         " records (it needs records + 1)");
  if (local >= records)
    fail("record " + std::to_string(local) + " is past the shard's " + std::to_string(records));
  std::array<std::uint64_t, 2> o{};
  read_1d_range(offs.get(), H5T_NATIVE_UINT64, local, 2, o.data(), file, "names/offsets");
  handle data = open_dataset(fid.get(), f, "names/data");
  const std::uint64_t bytes = check_1d_integer(data.get(), file, "names/data", true);
  {
    handle t = checked(H5Dget_type(data.get()), H5Tclose, "H5Dget_type", "no datatype", file);
    if (H5Tget_size(t.get()) != 1) fail("names/data must hold uint8 bytes");
  }
  if (o[0] > o[1] || o[1] > bytes)
    fail("the record's name offsets [" + std::to_string(o[0]) + ", " + std::to_string(o[1]) +
         ") are out of order or past names/data's " + std::to_string(bytes) + " bytes");
  if (o[1] - o[0] > max_record_name)
    fail("the record's name is " + std::to_string(o[1] - o[0]) + " bytes long");
  std::string name(static_cast<std::size_t>(o[1] - o[0]), '\0');
  read_1d_range(data.get(), H5T_NATIVE_UCHAR, o[0], o[1] - o[0], name.data(), file, "names/data");
  return name;
}

}  // namespace gpufeed::detail::hdf5
