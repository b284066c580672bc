// gpufeed::detail — a `gpufeed pack` output directory given where shards are expected: the
// directory itself or its manifest.json stands for the shards the manifest lists, in record
// order. Shared by hdf5_source, lmdb_source and the gpufeed CLI.
//
// A pack directory is recognised by its manifest.json (an LMDB shard is itself a directory, one
// holding data.mdb). A directory with neither, but with pack's hidden temporaries
// (".<shard>.tmp", ".manifest.json.tmp") or shards of pack's names, is a pack that did not
// finish (interrupted, killed, or failed without cleaning up): refused with a format_error
// saying so, because its shards hold only part of the input.
#pragma once

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "gpufeed/detail/pack_manifest.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail {

// "<prefix>-NNNNN.h5" or "<prefix>-NNNNN.lmdb" (five or more digits): a name pack gives shards.
inline bool is_pack_shard_name(const std::string& n) {
  std::string stem;
  if (n.size() > 3 && n.ends_with(".h5"))
    stem = n.substr(0, n.size() - 3);
  else if (n.size() > 5 && n.ends_with(".lmdb"))
    stem = n.substr(0, n.size() - 5);
  else
    return false;
  const std::size_t dash = stem.rfind('-');
  if (dash == std::string::npos || dash == 0 || stem.size() - dash - 1 < 5) return false;
  return std::all_of(stem.begin() + static_cast<std::ptrdiff_t>(dash) + 1, stem.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// What an unfinished pack left in `dir` (no manifest.json): hidden temporaries and shards of
// pack's names. Empty when dir has a manifest.json or holds none of these.
struct pack_leftovers {
  std::vector<std::string> temporaries, shards;  // file names, sorted
  [[nodiscard]] bool empty() const noexcept { return temporaries.empty() && shards.empty(); }
  // "2 hidden temporaries (.shard-00001.h5.tmp, ...) and 1 finished shard (shard-00000.h5)"
  [[nodiscard]] std::string text() const {
    const auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (std::size_t i = 0; i < v.size() && i < 3; ++i) s += (i ? ", " : "") + v[i];
      return s + (v.size() > 3 ? ", ..." : "");
    };
    std::string s;
    if (!temporaries.empty())
      s += std::to_string(temporaries.size()) + " hidden temporar" +
           (temporaries.size() == 1 ? "y" : "ies") + " (" + list(temporaries) + ")";
    if (!shards.empty())
      s += std::string(s.empty() ? "" : " and ") + std::to_string(shards.size()) +
           " shard" + (shards.size() == 1 ? "" : "s") + " (" + list(shards) + ")";
    return s;
  }
};

inline pack_leftovers find_pack_leftovers(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  pack_leftovers l;
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || fs::exists(dir / manifest_file_name, ec) ||
      fs::exists(dir / "data.mdb", ec))
    return l;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.size() > 5 && n.front() == '.' && n.ends_with(".tmp")) {
      const std::string inner = n.substr(1, n.size() - 5);
      if (inner == manifest_file_name || is_pack_shard_name(inner)) l.temporaries.push_back(n);
    } else if (is_pack_shard_name(n)) {
      l.shards.push_back(n);
    }
  }
  std::sort(l.temporaries.begin(), l.temporaries.end());
  std::sort(l.shards.begin(), l.shards.end());
  // Shards of pack's names alone may be another tool's naming; with a temporary they are not.
  if (l.temporaries.empty()) l.shards.clear();
  return l;
}

// format_error when dir is a pack that did not finish (see above).
inline void refuse_unfinished_pack(const std::filesystem::path& dir) {
  const pack_leftovers l = find_pack_leftovers(dir);
  if (l.empty()) return;
  throw format_error("the pack in this directory did not finish: it has no manifest.json, only " +
                         l.text() +
                         "; its shards hold part of the input at most. Run gpufeed pack "
                         "again with --force (or delete the directory)",
                     file_context(dir.string()));
}

// The shard paths a pack directory (or its manifest.json) stands for, in record order; nullopt
// when `p` is neither (a shard file, an LMDB environment, a directory without a manifest that is
// not an unfinished pack). format_error for an unfinished pack, or a manifest.json that is not a
// complete gpufeed pack manifest, or (when `want_format` is set) one of the other format.
inline std::optional<std::vector<std::filesystem::path>> pack_directory_shards(
    const std::filesystem::path& p, const char* want_format = nullptr) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path manifest;
  if (p.filename() == manifest_file_name && fs::is_regular_file(p, ec)) {
    manifest = p;
  } else if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "data.mdb", ec)) return std::nullopt;  // an LMDB environment
    if (!fs::exists(p / manifest_file_name, ec)) {
      refuse_unfinished_pack(p);
      return std::nullopt;
    }
    manifest = p / manifest_file_name;
  } else {
    return std::nullopt;
  }
  const auto m = read_pack_manifest(manifest);
  if (!m || m->order.empty())
    throw format_error(
        "not a complete gpufeed pack manifest (truncated, or written by another tool): the pack "
        "may not have finished; run gpufeed pack again with --force",
        file_context(manifest.string()));
  if (want_format && m->format != want_format)
    throw format_error("the pack holds " + m->format + " shards, not " + want_format +
                           " (open it with " + (m->format == "lmdb" ? "lmdb_source" : "hdf5_source") +
                           ")",
                       file_context(manifest.string()));
  std::vector<fs::path> shards;
  for (const std::string& name : m->order) {
    const fs::path s = manifest.parent_path() / name;
    if (!fs::exists(s, ec))
      throw format_error("the manifest lists shard '" + name +
                             "', which is missing: the pack is incomplete",
                         file_context(manifest.string()));
    shards.push_back(s);
  }
  return shards;
}

// A source's shard list as given, or the shards of the one pack directory (or manifest) given.
inline std::vector<std::filesystem::path> expand_pack_directory(
    std::vector<std::filesystem::path> shards, const char* want_format) {
  if (shards.size() != 1) return shards;
  if (auto listed = pack_directory_shards(shards.front(), want_format)) return std::move(*listed);
  return shards;
}

}  // namespace gpufeed::detail
