// gpufeed — the input lists of pack(): a directory tree or a list file (part of
// gpufeed/pack/pack.hpp, included at its end; see the contracts there).
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "gpufeed/error.hpp"

namespace gpufeed::detail::pack {

namespace fs = std::filesystem;

[[noreturn]] inline void throw_fs(const std::string& what, const fs::path& p, const char* api,
                                  const std::error_code& ec) {
  throw io_error(what, os_call_context(p.string(), api, ec));
}

[[noreturn]] inline void throw_errno(const std::string& what, const fs::path& p, const char* api,
                                     int e) {
  throw io_error(what, os_call_context(p.string(), api, e));
}

// True when `p` (absolute, lexically normal) lies inside `root` (same form) or is root itself.
inline bool lies_within(const fs::path& p, const fs::path& root) {
  auto pi = p.begin();
  for (auto ri = root.begin(); ri != root.end(); ++ri, ++pi) {
    if (pi == p.end() || *pi != *ri) return false;
  }
  return true;
}

// The subdirectories directly under root, sorted byte-wise (std::string compares as unsigned
// char). Symlinks to directories are not counted: list_directory does not descend into them.
inline std::vector<std::string> subdirectory_names(const fs::path& root) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(root, ec), end;
  if (ec) throw_fs("cannot list the input directory", root, "opendir", ec);
  for (; it != end; it.increment(ec)) {
    const fs::file_status st = it->symlink_status(ec);
    if (ec) throw_fs("cannot stat a directory entry", it->path(), "lstat", ec);
    if (fs::is_directory(st)) names.push_back(it->path().filename().string());
  }
  if (ec) throw_fs("cannot list the input directory", root, "readdir", ec);
  std::sort(names.begin(), names.end());
  return names;
}

struct listed_file {
  fs::path path;
  std::string name;  // relative to root, '/'-separated
};

// Entries list_directory skips: not regular files (and no links to one).
struct skipped_count {
  std::uint64_t count = 0;
  std::string first;  // the byte-wise first name of them
  void add(const std::string& name) {
    if (count++ == 0 || name < first) first = name;
  }
};

// Depth-first walk of `dir` (a real directory under root), appending what list_directory takes.
inline void walk(const fs::path& dir, const fs::path& canonical_root, const std::string& prefix,
                 std::vector<listed_file>& out, skipped_count& skipped) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) throw_fs("cannot list the input directory", dir, "opendir", ec);
  for (; it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string name = prefix + p.filename().string();
    const fs::file_status lst = it->symlink_status(ec);
    if (ec) throw_fs("cannot stat a directory entry", p, "lstat", ec);
    if (fs::is_directory(lst)) {
      walk(p, canonical_root, name + "/", out, skipped);
    } else if (fs::is_regular_file(lst)) {
      out.push_back({p, name});
    } else if (fs::is_symlink(lst)) {
      const fs::file_status st = fs::status(p, ec);
      // A loop (ELOOP) or an unreadable target is reported as what it is; only a link whose
      // target is missing "points to nothing".
      if (ec && ec != std::errc::no_such_file_or_directory)
        throw_fs("cannot follow a symbolic link", p, "stat", ec);
      if (ec || !fs::exists(st)) throw_errno("symbolic link points to nothing", p, "stat", ENOENT);
      if (fs::is_directory(st)) continue;  // not followed: no loops
      if (!fs::is_regular_file(st)) {
        skipped.add(name);
        continue;
      }
      const fs::path target = fs::canonical(p, ec);
      if (ec) throw_fs("cannot resolve a symbolic link", p, "realpath", ec);
      if (!lies_within(target, canonical_root))
        throw format_error("symbolic link points outside the input directory (to '" +
                               target.string() +
                               "'); pack reads only what lies under the directory it is given: "
                               "name files elsewhere in a list file instead",
                           file_context(p));
      out.push_back({p, name});
    } else {
      // FIFOs, sockets and devices are not data (and opening a FIFO would block): skipped.
      skipped.add(name);
    }
  }
  if (ec) throw_fs("cannot list the input directory", dir, "readdir", ec);
}

inline std::vector<listed_file> list_files(const fs::path& root, skipped_count* skipped = nullptr) {
  std::error_code ec;
  const fs::file_status st = fs::status(root, ec);
  if (!fs::exists(st)) {
    if (!ec) ec = std::make_error_code(std::errc::no_such_file_or_directory);
    throw_fs("input directory does not exist", root, "stat", ec);
  }
  if (!fs::is_directory(st)) throw config_error("input is not a directory", file_context(root));
  const fs::path canonical_root = fs::canonical(root, ec);
  if (ec) throw_fs("cannot resolve the input directory", root, "realpath", ec);
  std::vector<listed_file> files;
  skipped_count sk;
  walk(root, canonical_root, "", files, sk);
  if (skipped) *skipped = sk;
  std::sort(files.begin(), files.end(),
            [](const listed_file& a, const listed_file& b) { return a.name < b.name; });
  return files;
}

// One parsed line of a list file.
struct list_entry {
  std::string path;
  std::optional<std::int64_t> label;
};

[[noreturn]] inline void list_fail(const fs::path& list, std::size_t line, const std::string& why) {
  throw format_error("list file line " + std::to_string(line) + ": " + why, file_context(list));
}

inline std::vector<list_entry> parse_list(const std::string& text, const fs::path& list) {
  std::vector<list_entry> out;
  std::size_t line = 0, at = 0;
  while (at < text.size()) {
    ++line;
    std::size_t eol = text.find('\n', at);
    if (eol == std::string::npos) eol = text.size();
    std::string_view l(text.data() + at, eol - at);
    at = eol + 1;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.empty()) continue;
    if (l.find('\0') != std::string_view::npos) list_fail(list, line, "contains a NUL byte");
    list_entry e;
    const std::size_t tab = l.find('\t');
    e.path = std::string(l.substr(0, tab));
    if (e.path.empty()) list_fail(list, line, "empty path");
    if (tab != std::string_view::npos) {
      const std::string_view v = l.substr(tab + 1);
      std::int64_t label = 0;
      const auto r = std::from_chars(v.data(), v.data() + v.size(), label);
      if (v.empty() || r.ec != std::errc{} || r.ptr != v.data() + v.size())
        list_fail(list, line,
                  "the label '" + std::string(v) +
                      "' is not a decimal 64-bit integer (format: "
                      "PATH or PATH<TAB>LABEL)");
      e.label = label;
    }
    out.push_back(std::move(e));
  }
  return out;
}

inline std::string read_text_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw_errno("cannot open the list file", p, "open", errno);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw io_error("cannot read the list file", file_context(p));
  return text;
}

}  // namespace gpufeed::detail::pack
