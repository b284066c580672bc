// gpufeed — closing an opened LMDB shard's environment and opening it again (the catalog's
// shard_lru callbacks): the record table stays, so a reopen costs an mdb_env_open, one cursor
// step to find the map and no scan.
//
// A reopen must find the file the table describes: the same device and inode and, for immutable
// shards, the same size and LMDB transaction id (the newest meta page's txnid, which every
// commit raises). A difference is a format_error naming the shard: its keys, sizes and value
// offsets would no longer hold. Mutable shards (immutable = false) are written meanwhile by
// contract, so only device and inode are compared; their reads check each value's size.
#pragma once

#include <lmdb.h>

#include <cstddef>
#include <string>
#include <utility>

#include "gpufeed/detail/lmdb/handles.hpp"
#include "gpufeed/detail/lmdb/map_region.hpp"
#include "gpufeed/detail/lmdb/shard.hpp"
#include "gpufeed/detail/lmdb/shard_table.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::lmdb {

// Closes t's environment (its descriptor and map). No transaction on it may be live: readers end
// theirs before they unpin the shard.
inline void close_env(const shard_table& t) noexcept {
  t.s.handle.reset();
  t.s.fd = -1;
  t.s.valid = region{};
}

// Why `now` is not the file `was` describes, or empty.
inline std::string identity_change(const shard& was, const shard& now, bool immutable) {
  if (now.dev != was.dev || now.ino != was.ino) return "another file now has its name";
  if (!immutable) return {};
  if (now.file_size != was.file_size)
    return "its data file had " + std::to_string(was.file_size) + " bytes, now " +
           std::to_string(now.file_size);
  if (now.txnid != was.txnid || now.psize != was.psize)
    return "LMDB's last transaction was " + std::to_string(was.txnid) + ", now " +
           std::to_string(now.txnid);
  return {};
}

// Opens t's environment again after close_env(). Throws open_shard's errors (io_error "too many
// open files" when no descriptor is left), or format_error naming the data file when it was
// replaced or changed since the first open.
inline void reopen_env(const shard_table& t, unsigned max_readers, bool immutable) {
  shard now = open_shard(t.s.dir, max_readers, immutable, /*reopening=*/true);
  if (const std::string why = identity_change(t.s, now, immutable); !why.empty())
    throw format_error("LMDB shard replaced or changed since it was opened (" + why +
                           "): its record table no longer describes it; open the source again",
                       file_context(t.s.data_file));
  {
    read_txn txn;
    if (int rc = txn.activate(now.handle.get()); rc != MDB_SUCCESS)
      throw_status(rc, "mdb_txn_begin", "cannot begin a read transaction",
                   file_context(now.data_file));
    if (int rc = mdb_dbi_open(txn.get(), nullptr, 0, &now.dbi); rc != MDB_SUCCESS)
      throw_status(rc, "mdb_dbi_open", "cannot open the main database",
                   file_context(now.data_file));
    // The map's place, from a key LMDB returns (as the scan found it at the first open).
    {
      MDB_cursor* raw = nullptr;
      if (int rc = mdb_cursor_open(txn.get(), now.dbi, &raw); rc != MDB_SUCCESS)
        throw_status(rc, "mdb_cursor_open", "cannot open a cursor", file_context(now.data_file));
      cursor cur(raw);
      MDB_val k{}, v{};
      if (mdb_cursor_get(raw, &k, &v, MDB_FIRST) == MDB_SUCCESS) {
        const std::byte* base = map_base_direct(k.mv_data, now.psize, now.map_size, now.fd);
        if (!base) base = map_base_of(file_mappings(), k.mv_data, now.map_size);
        if (base) now.valid = region{base, immutable ? now.file_size : now.map_size};
      }
    }
    if (int rc = txn.commit(); rc != MDB_SUCCESS)
      throw_status(rc, "mdb_txn_commit", "cannot end the reopen transaction",
                   file_context(now.data_file));
  }
  t.s = std::move(now);
}

}  // namespace gpufeed::detail::lmdb
