// gpufeed — pack(): writing one LMDB shard (part of gpufeed/pack/pack.hpp).
//
// One environment per shard: a directory holding data.mdb only (MDB_NOLOCK: the writer is alone,
// and readers of immutable shards use no lock file either). Keys are the record's global index
// as 10 decimal digits, then an underscore and the input's name when the record has one and the
// key stays within LMDB's 511 bytes ("0000000042_train/cat/0042.jpg", Caffe's convention;
// detail/lmdb/record_key.hpp): the fixed-width digits make key order = record order, so every
// key is appended (MDB_APPEND), and lmdb_source::name_of reads the name back.
// MDB_WRITEMAP + MDB_RESERVE: a value's pages are the file's own (mapped) pages, and the record's
// pieces are copied straight into them — one copy from the input file, no malloc'd page, no
// pwrite (2-3x faster than without WRITEMAP here). WRITEMAP grows the file to the map size
// (sparse where the filesystem allows), so finish() cuts it back to the pages in use.
// Space: a store into a page of a sparse mapped file that the file system cannot back raises
// SIGBUS (a full disk would kill the process and leave the temporary behind), so the whole map
// is reserved with posix_fallocate right after mdb_env_open, before LMDB touches a page: a full
// file system is an io_error (ENOSPC, naming data.mdb) and pack removes the temporary. The cost:
// while a shard is written its file holds the map bound (lmdb_map_bound, 2-4x the shard's bytes)
// of disk, until finish() trims it.
// Transactions commit every 64 MiB, at record boundaries; MDB_NOSYNC while writing, one
// mdb_env_sync(force) and an fsync at the end.
//
// Determinism: a fresh page of the sparse file reads as zeros, a reused page holds what the same
// sequence of operations left in it, the meta pages hold only txn ids, the map size (computed
// from the input sizes) and page numbers: data.mdb is byte-identical run to run on machines with
// the same page size (the tests compare two runs).
//
// Datum values (optional): a Caffe Datum message `data` (field 4) + `label` (field 5).
#pragma once

#include <fcntl.h>
#include <lmdb.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "gpufeed/detail/lmdb/handles.hpp"
#include "gpufeed/detail/lmdb/record_key.hpp"
#include "gpufeed/pack/detail/listing.hpp"
#include "gpufeed/pack/detail/output.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::pack {

inline std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
inline std::byte* put_varint(std::byte* p, std::uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<std::byte>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::byte>(v);
  return p;
}

// Bytes of the stored value for a payload of n bytes.
inline std::uint64_t lmdb_value_size(std::uint64_t n, bool datum, std::int64_t label) {
  if (!datum) return n;
  return 1 + varint_size(n) + n + 1 + varint_size(static_cast<std::uint64_t>(label));
}

// An upper bound of the map a shard needs, from its value sizes (bytes of all values, count):
// small values share leaf pages (node header + key ~ 32 bytes each), large ones take overflow
// pages (page-rounded + 16-byte header); doubled for branch pages, the free list and pages
// copied on write between commits.
inline std::size_t lmdb_map_bound(std::span<const std::uint64_t> value_sizes) {
  const std::uint64_t psize = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::uint64_t sum = 0;
  for (const std::uint64_t v : value_sizes) {
    if (v + 32 <= psize / 2)
      sum += 2 * (v + 32);
    else
      sum += (v + 16 + psize - 1) / psize * psize + 64;
  }
  const std::uint64_t total = 2 * sum + (std::uint64_t{16} << 20);
  return static_cast<std::size_t>((total + psize - 1) / psize * psize);
}

class lmdb_shard_writer {
 public:
  // Creates directory `dir` (which must not exist) and the environment in it.
  lmdb_shard_writer(const std::filesystem::path& dir, std::size_t map_size, bool datum)
      : dir_(dir), file_((dir / "data.mdb").string()), datum_(datum) {
    std::error_code ec;
    if (!std::filesystem::create_directory(dir, ec) || ec) {
      if (!ec) ec = std::make_error_code(std::errc::file_exists);
      throw_fs("cannot create the LMDB shard directory", dir, "mkdir", ec);
    }
    MDB_env* raw = nullptr;
    check(mdb_env_create(&raw), "mdb_env_create", "cannot create an LMDB environment");
    env_ = lmdb::env(raw);
    check(mdb_env_set_mapsize(raw, map_size), "mdb_env_set_mapsize", "cannot set the map size");
    check(mdb_env_open(raw, dir.c_str(), MDB_NOLOCK | MDB_NOSYNC | MDB_WRITEMAP, 0644),
          "mdb_env_open", "cannot create the LMDB environment");
    reserve(map_size);
    begin();
    check(mdb_dbi_open(txn_, nullptr, 0, &dbi_), "mdb_dbi_open", "cannot open the database");
  }
  lmdb_shard_writer(const lmdb_shard_writer&) = delete;
  lmdb_shard_writer& operator=(const lmdb_shard_writer&) = delete;
  ~lmdb_shard_writer() {
    if (txn_) mdb_txn_abort(txn_);
  }

  // Starts record `global` (input `name`, or "" when none) with `size` payload bytes; append()
  // then delivers them in order.
  void begin_record(std::uint64_t global, std::string_view name, std::uint64_t size,
                    std::int64_t label) {
    std::string key = lmdb::record_key(global, name);
    MDB_val k{key.size(), key.data()};
    MDB_val v{static_cast<std::size_t>(lmdb_value_size(size, datum_, label)), nullptr};
    error_context c = context();
    c.record = global;
    if (int rc = mdb_put(txn_, dbi_, &k, &v, MDB_APPEND | MDB_RESERVE); rc != MDB_SUCCESS)
      lmdb::throw_status(rc, "mdb_put", "cannot store a record", std::move(c));
    at_ = static_cast<std::byte*>(v.mv_data);
    if (datum_) {
      *at_++ = std::byte{0x22};  // field 4 (data), length-delimited
      at_ = put_varint(at_, size);
      std::byte* tail = at_ + size;
      *tail++ = std::byte{0x28};  // field 5 (label), varint; negative int32 sign-extended
      put_varint(tail, static_cast<std::uint64_t>(label));
    }
    pending_ += v.mv_size;
  }

  void append(const std::byte* p, std::uint64_t n) {
    if (n) std::memcpy(at_, p, static_cast<std::size_t>(n));
    at_ += n;
  }

  // Ends the current record; commits when 64 MiB are pending.
  void end_record() {
    at_ = nullptr;
    if (pending_ >= (std::uint64_t{64} << 20)) {
      commit();
      begin();
    }
  }

  // Commits, closes the environment, cuts data.mdb to the pages in use and syncs it.
  void finish() {
    commit();
    MDB_envinfo info{};
    MDB_stat st{};
    check(mdb_env_info(env_.get(), &info), "mdb_env_info", "cannot read the environment info");
    check(mdb_env_stat(env_.get(), &st), "mdb_env_stat", "cannot read the environment stats");
    check(mdb_env_sync(env_.get(), 1), "mdb_env_sync", "cannot flush the LMDB shard to disk");
    env_ = lmdb::env();
    // MDB_WRITEMAP grew the file to the map size (sparse); pages past the last one in use hold
    // nothing, and without WRITEMAP LMDB would never have written them.
    const auto used = (static_cast<std::uint64_t>(info.me_last_pgno) + 1) * st.ms_psize;
    if (::truncate(file_.c_str(), static_cast<off_t>(used)) != 0)
      throw_errno("cannot trim the LMDB data file", file_, "truncate", errno);
    sync_file(file_);
  }

 private:
  error_context context() const { return file_context(file_); }
  // Backs every page of the map with disk blocks (see the header comment). LMDB has written only
  // the two meta pages (with pwrite) and sized the file to the map (ftruncate) so far.
  void reserve(std::size_t map_size) const {
    int fd = -1;
    check(mdb_env_get_fd(env_.get(), &fd), "mdb_env_get_fd", "cannot get the LMDB data file");
    int rc = 0;
    do {
      rc = ::posix_fallocate(fd, 0, static_cast<off_t>(map_size));
    } while (rc == EINTR);
    if (rc != 0)
      throw_errno("cannot reserve " + std::to_string(map_size) +
                      " bytes of disk for the LMDB shard (its map: pack writes into it through "
                      "memory and needs the space before it starts)",
                  file_, "posix_fallocate", rc);
  }
  void check(int rc, const char* api, const char* what) const {
    if (rc != MDB_SUCCESS) lmdb::throw_status(rc, api, what, context());
  }
  void begin() { check(mdb_txn_begin(env_.get(), nullptr, 0, &txn_), "mdb_txn_begin", "no txn"); }
  void commit() {
    MDB_txn* t = txn_;
    txn_ = nullptr;
    pending_ = 0;
    check(mdb_txn_commit(t), "mdb_txn_commit", "cannot commit to the LMDB shard");
  }

  std::filesystem::path dir_;
  std::string file_;
  bool datum_;
  lmdb::env env_;
  MDB_txn* txn_ = nullptr;
  MDB_dbi dbi_ = 0;
  std::byte* at_ = nullptr;
  std::uint64_t pending_ = 0;
};

}  // namespace gpufeed::detail::pack
