// gpufeed — opening one LMDB shard read-only and checking it can be read without crashing.
//
// Open sequence (docs/design.md, "LMDB open flags"): the meta pages are checked with plain reads (meta_check.hpp),
// then mdb_env_create, maxreaders, (immutable: map exactly the file), mdb_env_open(MDB_RDONLY |
// MDB_NOTLS | MDB_NORDAHEAD [| MDB_NOLOCK]), and — before any B-tree page is touched — the file
// must hold every page the newest meta page says the database uses: a truncated data.mdb would
// otherwise raise SIGBUS on the first access past its end.
#pragma once

#include <lmdb.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <system_error>

#include "gpufeed/detail/lmdb/handles.hpp"
#include "gpufeed/detail/lmdb/map_region.hpp"
#include "gpufeed/detail/lmdb/meta_check.hpp"
#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/detail/lmdb/tree_check.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::lmdb {

// One open shard. Its dbi is the unnamed (main) database, opened once for the env's lifetime.
struct shard {
  std::filesystem::path dir;  // as the user gave it
  std::string data_file;      // the data file, named in every error about this shard
  env handle;
  MDB_dbi dbi = 0;
  std::size_t file_size = 0;  // data file size at open
  std::size_t map_size = 0;   // LMDB's me_mapsize
  std::uint32_t psize = 0;    // LMDB's page size
  int fd = -1;                // LMDB's descriptor of the data file (LMDB closes it)
  region valid;               // bytes keys and values may point into (set by the scan)
  // The data file's identity when it was opened (a reopen must find the same): device, inode,
  // and LMDB's last committed transaction (the newest meta page's txnid).
  dev_t dev = 0;
  ino_t ino = 0;
  std::uint64_t txnid = 0;
};

// Why value v (an MDB_val LMDB returned for s) must not be delivered, or null. A value on
// overflow pages starts 16 bytes (one page header) into a page, which no value inside a leaf page
// can (leaf nodes lie above the page's node-offset array); its first page's header must name
// that page, be an overflow page (P_OVERFLOW), and count enough pages for the value, all inside
// the region. LMDB itself reads only the page count (to free pages), so a wrong overflow page
// number would otherwise deliver another page's bytes. Needs the map's place (s.valid).
inline const char* check_overflow_value(const shard& s, const MDB_val& v) noexcept {
  namespace P = page_layout;
  if (!s.valid.known() || s.psize == 0) return nullptr;
  const std::uintptr_t off = reinterpret_cast<std::uintptr_t>(v.mv_data) -
                             reinterpret_cast<std::uintptr_t>(s.valid.base);
  if (off % s.psize != P::header) return nullptr;
  const auto* h = static_cast<const unsigned char*>(v.mv_data) - P::header;
  std::uint64_t pgno = 0;
  std::uint16_t flags = 0;
  std::uint32_t pages = 0;
  std::memcpy(&pgno, h, 8);
  std::memcpy(&flags, h + 10, 2);
  std::memcpy(&pages, h + 12, 4);
  const std::uint64_t at = off / s.psize;
  if (pgno != at) return "the value's first page has the header of another page";
  if ((flags & (P::p_overflow | P::p_branch | P::p_leaf | P::p_meta)) != P::p_overflow)
    return "the value's first page is not an overflow page";
  const std::uint64_t need = (P::header + v.mv_size + s.psize - 1) / s.psize;
  if (pages < need) return "the overflow page counts fewer pages than the value needs";
  if (at + pages > s.valid.size / s.psize) return "the overflow pages run past the file";
  return nullptr;
}

// Opens the environment at `path`: a directory holding data.mdb (+ lock.mdb), the data.mdb file
// itself, or any other file, opened as a MDB_NOSUBDIR environment. reopening: the B-tree's pages
// are not checked again (the caller compares the file's identity with the first open's).
inline shard open_shard(const std::filesystem::path& path, unsigned max_readers, bool immutable,
                        bool reopening = false) {
  namespace fs = std::filesystem;
  shard s;
  s.dir = path;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  fs::path env_path = path;
  fs::path data = path / "data.mdb";
  unsigned flags = MDB_RDONLY | MDB_NOTLS | MDB_NORDAHEAD;
  if (immutable) flags |= MDB_NOLOCK;
  if (!fs::exists(st))
    throw io_error("LMDB shard does not exist", os_call_context(path.string(), "stat", ENOENT));
  if (fs::is_regular_file(st)) {
    data = path;
    if (path.filename() == "data.mdb") {
      env_path = path.has_parent_path() ? path.parent_path() : fs::path(".");
    } else {
      flags |= MDB_NOSUBDIR;
    }
  } else if (!fs::is_directory(st)) {
    throw format_error("not an LMDB environment: neither a directory nor a file",
                       file_context(path.string()));
  }
  s.data_file = data.string();
  const fs::file_status dst = fs::status(data, ec);
  if (!fs::exists(dst))
    throw format_error("not an LMDB environment: the directory has no data.mdb",
                       file_context(path.string()));
  if (!fs::is_regular_file(dst))
    throw format_error("not an LMDB environment: data.mdb is not a regular file",
                       file_context(s.data_file));

  const auto data_size = fs::file_size(data, ec);
  if (ec) {
    error_context c = file_context(s.data_file);
    c.api = "stat";
    c.status = ec.value();
    c.status_text = ec.message();
    throw io_error("cannot read the size of data.mdb", std::move(c));
  }
  if (data_size == 0)
    throw format_error("not an LMDB environment: data.mdb is empty", file_context(s.data_file));
  check_data_file(s.data_file, data_size, immutable && !reopening);

  MDB_env* raw = nullptr;
  if (int rc = mdb_env_create(&raw); rc != MDB_SUCCESS)
    throw_status(rc, "mdb_env_create", "cannot create an LMDB environment handle",
                 file_context(s.data_file));
  s.handle = env(raw);
  if (int rc = mdb_env_set_maxreaders(raw, max_readers); rc != MDB_SUCCESS)
    throw_status(rc, "mdb_env_set_maxreaders", "cannot set the LMDB reader limit",
                 file_context(s.data_file));
  if (immutable) {
    // Map the file as it is (not the writer's mapsize, which may be a terabyte of address space
    // per shard). LMDB raises this to the committed size if the file is shorter; that case is
    // refused before any page is touched.
    if (int rc = mdb_env_set_mapsize(raw, static_cast<std::size_t>(data_size)); rc != MDB_SUCCESS)
      throw_status(rc, "mdb_env_set_mapsize", "cannot set the LMDB map size",
                   file_context(s.data_file));
  }
  if (int rc = mdb_env_open(raw, env_path.c_str(), flags, 0664); rc != MDB_SUCCESS) {
    if (rc == MDB_INVALID)
      throw_status(rc, "mdb_env_open", "not an LMDB environment: data.mdb has no valid meta page",
                   file_context(s.data_file));
    if (rc == ENOENT)  // LMDB's answer for an empty data file
      throw_status(rc, "mdb_env_open", "not an LMDB environment: data.mdb is empty",
                   file_context(s.data_file));
    throw_status(rc, "mdb_env_open", io::open_failure(rc, "cannot open the LMDB environment"),
                 file_context(s.data_file));
  }

  // The file must cover every page in use, or touching the map past its end raises SIGBUS.
  int fd = -1;
  struct stat fst{};
  if (int rc = mdb_env_get_fd(raw, &fd); rc != MDB_SUCCESS)
    throw_status(rc, "mdb_env_get_fd", "cannot get the LMDB data file", file_context(s.data_file));
  if (::fstat(fd, &fst) != 0)
    throw_status(errno, "fstat", "cannot stat the LMDB data file", file_context(s.data_file));
  MDB_envinfo info{};
  MDB_stat est{};
  if (int rc = mdb_env_info(raw, &info); rc != MDB_SUCCESS)
    throw_status(rc, "mdb_env_info", "cannot read the LMDB environment info",
                 file_context(s.data_file));
  if (int rc = mdb_env_stat(raw, &est); rc != MDB_SUCCESS)
    throw_status(rc, "mdb_env_stat", "cannot read the LMDB environment statistics",
                 file_context(s.data_file));
  s.file_size = static_cast<std::size_t>(fst.st_size);
  s.fd = fd;
  s.psize = est.ms_psize;
  s.map_size = info.me_mapsize;
  s.dev = fst.st_dev;
  s.ino = fst.st_ino;
  s.txnid = info.me_last_txnid;
  const std::uint64_t pages = static_cast<std::uint64_t>(info.me_last_pgno) + 1;
  const std::uint64_t psize = est.ms_psize;
  if (psize == 0 || pages > std::numeric_limits<std::uint64_t>::max() / psize ||
      pages * psize > s.file_size) {
    throw corrupt_error("data.mdb is truncated: the file has " + std::to_string(s.file_size) +
                            " bytes but the database uses " + std::to_string(pages) +
                            " pages of " + std::to_string(psize) + " bytes",
                        file_context(s.data_file));
  }
  return s;
}

}  // namespace gpufeed::detail::lmdb
