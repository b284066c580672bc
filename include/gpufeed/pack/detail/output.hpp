// gpufeed — pack(): the output directory: shard names, refusing to overwrite what pack did not
// write, temporary names and the manifest file (part of gpufeed/pack/pack.hpp).
//
// Every path pack writes is out_dir / <name>, where <name> is built only from the prefix
// (checked: letters, digits, '.', '_', '-', not starting with '.'), a shard number and a fixed
// suffix. Input names are data stored inside shards, never paths, so no input name can make pack
// write elsewhere. Files are written under a hidden temporary name (".<name>.tmp") and renamed
// once complete and synced: a crash leaves at most a temporary, never a half shard with a final
// name. The manifest's temporary is created first and renamed last, so a directory pack is
// writing always holds a hidden temporary until the manifest is in place: however pack stops,
// what it leaves is recognised as a pack that did not finish (gpufeed/detail/pack_directory.hpp).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "gpufeed/pack/detail/listing.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::pack {

inline constexpr const char* manifest_name = "manifest.json";
// The manifest's first line: how pack recognises a manifest it may replace.
inline constexpr const char* manifest_marker = "{\n  \"kind\": \"gpufeed pack manifest\",\n";

inline void check_prefix(const std::string& prefix) {
  bool ok = !prefix.empty() && prefix.size() <= 200 && prefix.front() != '.';
  for (const char ch : prefix)
    ok = ok && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                ch == '.' || ch == '_' || ch == '-');
  if (!ok)
    throw config_error("shard prefix '" + prefix +
                       "' must be 1-200 letters, digits, '.', '_' or '-', not starting with '.'");
}

inline std::string shard_name(const std::string& prefix, std::size_t index, bool lmdb) {
  char num[32];
  std::snprintf(num, sizeof num, "%05zu", index);
  return prefix + "-" + num + (lmdb ? ".lmdb" : ".h5");
}

inline std::string temp_name(const std::string& name) { return "." + name + ".tmp"; }

// What an existing entry of out_dir is to pack.
enum class entry_kind { foreign, own_file, own_lmdb_dir, conflict };

inline bool is_shard_name(const std::string& n, const std::string& prefix, const char* suffix) {
  const std::string head = prefix + "-", tail = suffix;
  if (n.size() < head.size() + 5 + tail.size() || n.compare(0, head.size(), head) != 0 ||
      n.compare(n.size() - tail.size(), tail.size(), tail) != 0)
    return false;
  for (std::size_t i = head.size(); i < n.size() - tail.size(); ++i)
    if (n[i] < '0' || n[i] > '9') return false;
  return true;
}

inline bool starts_with_marker(const fs::path& p) {
  const std::string want = manifest_marker;
  std::string got(want.size(), '\0');
  std::FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) return false;
  const std::size_t n = std::fread(got.data(), 1, got.size(), f);
  std::fclose(f);
  return n == want.size() && got == want;
}

// An LMDB directory pack wrote holds data.mdb (and perhaps lock.mdb, made by a reader) only.
inline bool is_plain_lmdb_dir(const fs::path& p) {
  std::error_code ec;
  for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if ((n != "data.mdb" && n != "lock.mdb") || !fs::is_regular_file(it->symlink_status(ec)))
      return false;
  }
  return !ec;
}

inline entry_kind classify(const fs::path& p, const std::string& prefix) {
  std::string n = p.filename().string();
  const bool temp = n.size() > 5 && n.front() == '.' && n.compare(n.size() - 4, 4, ".tmp") == 0;
  if (temp) n = n.substr(1, n.size() - 5);
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(p, ec);
  const bool dir = fs::is_directory(st);
  if (n == manifest_name) {
    if (dir) return entry_kind::conflict;
    return (temp || fs::is_symlink(st) || starts_with_marker(p)) ? entry_kind::own_file
                                                                 : entry_kind::conflict;
  }
  if (is_shard_name(n, prefix, ".h5")) return dir ? entry_kind::conflict : entry_kind::own_file;
  if (is_shard_name(n, prefix, ".lmdb")) {
    if (!dir) return entry_kind::own_file;
    return is_plain_lmdb_dir(p) ? entry_kind::own_lmdb_dir : entry_kind::conflict;
  }
  return entry_kind::foreign;
}

// An absolute, lexically normal form of p without a trailing separator.
inline fs::path normal_absolute(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  if (ec) a = p;
  a = a.lexically_normal();
  if (a.filename().empty() && a.has_parent_path()) a = a.parent_path();
  return a;
}

// config_error unless out_dir lies outside the input directory `in_dir` (both resolved through
// symbolic links where they exist): packing a tree into itself would read its own output the next
// time, and `force` would then delete inputs.
inline void refuse_output_inside_input(const fs::path& in_dir, const fs::path& out_dir) {
  std::error_code e1, e2;
  const fs::path in = normal_absolute(fs::weakly_canonical(in_dir, e1));
  const fs::path out = normal_absolute(fs::weakly_canonical(out_dir, e2));
  if (!e1 && !e2 && lies_within(out, in))
    throw config_error("the output directory '" + out_dir.string() +
                           "' lies inside the input directory '" + in_dir.string() +
                           "': pack would read its own output as input; choose an output "
                           "directory outside the input",
                       file_context(out_dir));
}

// config_error unless no input lies inside out_dir (checked before out_dir is touched: with
// force, pack would otherwise delete an earlier pack's shards while listing them as inputs).
inline void refuse_inputs_inside_output(const std::vector<fs::path>& inputs,
                                        const fs::path& out_dir) {
  std::error_code ec;
  const fs::path out = normal_absolute(out_dir);
  const fs::path out_real = normal_absolute(fs::weakly_canonical(out_dir, ec));
  for (const fs::path& p : inputs) {
    const fs::path a = normal_absolute(p);
    if (lies_within(a, out) || (!ec && lies_within(a, out_real)))
      throw config_error("input file '" + p.string() + "' lies inside the output directory '" +
                             out_dir.string() +
                             "' (an earlier pack's output listed as input?): pack would replace "
                             "or delete it; choose an output directory outside the inputs",
                         file_context(p));
  }
}

// Makes out_dir ready: created when missing; an existing one must be empty, or — with force —
// loses the shards (of this prefix), manifest and temporaries an earlier pack wrote. Anything
// else there is left alone; an entry with one of pack's names that pack did not write (a
// manifest.json of another tool, a shard-named directory with other files) is a config_error.
inline void prepare_out_dir(const fs::path& out, const std::string& prefix, bool force) {
  std::error_code ec;
  const fs::file_status st = fs::status(out, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    throw config_error("the output path exists and is not a directory", file_context(out));
  if (!fs::exists(st)) {
    fs::create_directories(out, ec);
    if (ec) throw_fs("cannot create the output directory", out, "mkdir", ec);
    return;
  }
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec))
    entries.push_back(it->path());
  if (ec) throw_fs("cannot list the output directory", out, "readdir", ec);
  if (entries.empty()) return;
  if (!force) {
    // `ls` shows nothing when every entry is hidden: name them, and say what pack's are.
    std::string hidden;
    std::size_t own = 0, shown = 0;
    for (const fs::path& p : entries) {
      const std::string n = p.filename().string();
      if (n.front() != '.') continue;
      own += classify(p, prefix) != entry_kind::foreign;
      if (++shown <= 3) hidden += (hidden.empty() ? "" : ", ") + n;
    }
    if (shown == entries.size())
      throw config_error(
          "the output directory is not empty: it holds only hidden entries (" + hidden +
              (shown > 3 ? ", ..." : "") + ")" +
              (own == shown ? ", temporaries an interrupted or failed pack left behind"
                            : std::string()) +
              "; use force (gpufeed pack --force) to remove pack's and write the new pack, or "
              "delete them",
          file_context(out));
    throw config_error(
        "the output directory is not empty; use force (gpufeed pack --force) to "
        "replace the shards and manifest an earlier pack wrote there",
        file_context(out));
  }
  for (const fs::path& p : entries)
    if (classify(p, prefix) == entry_kind::conflict)
      throw config_error(
          "the output directory holds an entry with a name pack uses that pack "
          "did not write; remove or rename it",
          file_context(p));
  for (const fs::path& p : entries) {
    const entry_kind k = classify(p, prefix);
    if (k == entry_kind::own_file) fs::remove(p, ec);
    if (k == entry_kind::own_lmdb_dir) fs::remove_all(p, ec);
    if (ec) throw_fs("cannot remove an earlier pack's file", p, "unlink", ec);
  }
}

// Flushes a finished file to disk, so that renaming it to its final name never exposes a shard
// whose bytes a crash could lose.
inline void sync_file(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open a written file to flush it", p, "open", errno);
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) throw_errno("cannot flush a written file to disk", p, "fsync", e);
}

// Creates out/<temp_name(name)> empty, before anything else is written, and syncs the directory:
// the mark of a pack in progress that write_file_atomically(out, name, ...) replaces at the end.
// Returns its path, for the caller to remove when the pack fails.
inline fs::path mark_in_progress(const fs::path& out, const std::string& name) {
  const fs::path tmp = out / temp_name(name);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno("cannot create a file in the output directory", tmp, "open", errno);
  ::close(fd);
  const int dir = ::open(out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) throw_errno("cannot open the output directory to flush it", out, "open", errno);
  const int rc = ::fsync(dir);
  const int e = errno;
  ::close(dir);
  if (rc != 0 && e != EINVAL)  // EINVAL: a file system that cannot sync directories
    throw_errno("cannot flush the output directory", out, "fsync", e);
  return tmp;
}

// Writes `text` to out/name through a synced temporary (the mark_in_progress() file when there is
// one) and a rename.
inline void write_file_atomically(const fs::path& out, const std::string& name,
                                  const std::string& text) {
  const fs::path tmp = out / temp_name(name);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno("cannot create a file in the output directory", tmp, "open", errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      throw_errno("cannot write a file in the output directory", tmp, "write", e);
    }
    done += static_cast<std::size_t>(n);
  }
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) throw_errno("cannot flush a file in the output directory", tmp, "fsync", e);
  std::error_code ec;
  fs::rename(tmp, out / name, ec);
  if (ec) throw_fs("cannot rename a finished file to its final name", tmp, "rename", ec);
}

}  // namespace gpufeed::detail::pack
