// gpufeed — the LMDB source's vocabulary: the options it opens shards with and what it reports
// about each shard. A leaf header (no LMDB, no detail/), mirroring hdf5_options.hpp, so that
// code naming these types needs neither lmdb_source.hpp nor the LMDB library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace gpufeed {

struct lmdb_options {
  enum class value_format { raw, datum };
  value_format format = value_format::raw;
  // When shards are opened (an open keeps a descriptor and a map, and scans the shard):
  //   lazy   the first at construction, every other on first use of one of its records.
  //   eager  every shard at construction: every open error there.
  // Mutable shards (immutable = false) are always opened at construction.
  enum class open_kind { lazy, eager };
  open_kind open = open_kind::lazy;
  unsigned max_readers = 512;  // LMDB reader slots per shard (used when !immutable)
  bool immutable = true;       // MDB_NOLOCK: nobody writes the shards while they are open
  // The most shards whose environments (a descriptor and a map each, plus lock.mdb's when
  // mutable) are open at once; 0: no bound. Past it the least recently used shard not being read
  // is closed and reopened by its next read, keeping its record table (no rescan). May be
  // exceeded by one shard per reading thread (each pins the shard it reads). The default leaves
  // most of a 1024-descriptor limit (`ulimit -n`) to the rest of the process.
  std::size_t max_open_shards = 256;
};

struct lmdb_shard_info {
  std::filesystem::path path;
  std::uint64_t first_record = 0, records = 0;
  std::uint64_t data_bytes = 0;  // sum of delivered record sizes
  std::size_t min_record = 0, max_record = 0;
  std::string format;  // "raw" or "datum"
  bool opened = true;  // false: not opened yet (lazy): only path, place and records are known
};

}  // namespace gpufeed
