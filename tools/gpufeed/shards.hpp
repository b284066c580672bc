// The gpufeed CLI's shard detection, shared by inspect and doctor: what kind of shard a path is.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpufeed/error.hpp"

namespace gpufeed::cli {

// HDF5 files start with this signature at byte 0, 512, 1024, 2048, ... (after a user block).
inline bool has_hdf5_signature(const std::string& path, std::uint64_t size) {
  static const char sig[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  for (std::uint64_t at = 0; at + 8 <= size; at = at ? at * 2 : 512) {
    char buf[8];
    in.seekg(static_cast<std::streamoff>(at));
    if (!in.read(buf, 8)) return false;
    if (std::memcmp(buf, sig, 8) == 0) return true;
  }
  return false;
}

inline bool is_lmdb(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw io_error("cannot open shard", os_call_context(path, "stat", errno));
  if (S_ISDIR(st.st_mode)) {
    struct stat d {};
    const std::string data = path + "/data.mdb";
    if (::stat(data.c_str(), &d) == 0 && S_ISREG(d.st_mode)) return true;
    throw format_error("not a shard: a directory without data.mdb (not an LMDB environment)",
                       file_context(path));
  }
  if (S_ISREG(st.st_mode) && has_hdf5_signature(path, static_cast<std::uint64_t>(st.st_size)))
    return false;
  if (S_ISREG(st.st_mode) && std::filesystem::path(path).filename() == "data.mdb")
    return true;  // an environment's data file, as lmdb_source takes it
  throw format_error("not a shard: neither an HDF5 file nor an LMDB environment directory",
                     file_context(path));
}

// The shards directly under `dir` (HDF5 files and LMDB environment directories), sorted by name;
// entries that are neither are ignored. `lmdb` tells which kind was found; mixing both kinds is a
// format_error (the loader reads one format at a time).
inline std::vector<std::string> shards_under(const std::string& dir, bool& lmdb) {
  std::vector<std::string> h5, mdb;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string p = e.path().string();
    if (e.path().filename().string().starts_with(".")) continue;
    try {
      (is_lmdb(p) ? mdb : h5).push_back(p);
    } catch (const format_error&) {
    }
  }
  if (!h5.empty() && !mdb.empty())
    throw format_error("the directory holds both HDF5 and LMDB shards", file_context(dir));
  lmdb = !mdb.empty();
  auto& out = lmdb ? mdb : h5;
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpufeed::cli
