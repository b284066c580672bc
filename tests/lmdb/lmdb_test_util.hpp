// Test helpers: LMDB environments written with the LMDB C API directly.
#pragma once

#include <lmdb.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pb_writer.hpp"

namespace gpufeed::test {

using kv_list = std::vector<std::pair<std::string, std::string>>;

inline void mdb_ok(int rc, const char* what) {
  if (rc != MDB_SUCCESS) throw std::runtime_error(std::string(what) + ": " + mdb_strerror(rc));
}

struct lmdb_write_options {
  unsigned db_flags = 0;       // e.g. MDB_DUPSORT
  unsigned env_flags = 0;      // e.g. MDB_NOSUBDIR
  std::size_t map_size = 0;    // 0: enough for the values
};

// Writes (or adds to) the environment at path with the given entries; LMDB sorts them by key.
inline void write_lmdb(const std::filesystem::path& path, const kv_list& entries,
                       lmdb_write_options o = {}) {
  if (!(o.env_flags & MDB_NOSUBDIR)) std::filesystem::create_directories(path);
  std::size_t bytes = 1 << 20;
  for (const auto& [k, v] : entries) bytes += 2 * (k.size() + v.size()) + 4096;
  MDB_env* env = nullptr;
  mdb_ok(mdb_env_create(&env), "mdb_env_create");
  mdb_ok(mdb_env_set_mapsize(env, o.map_size ? o.map_size : bytes), "mdb_env_set_mapsize");
  mdb_ok(mdb_env_open(env, path.c_str(), o.env_flags, 0664), "mdb_env_open");
  MDB_txn* txn = nullptr;
  mdb_ok(mdb_txn_begin(env, nullptr, 0, &txn), "mdb_txn_begin");
  MDB_dbi dbi = 0;
  mdb_ok(mdb_dbi_open(txn, nullptr, o.db_flags | MDB_CREATE, &dbi), "mdb_dbi_open");
  for (const auto& [k, v] : entries) {
    MDB_val key{k.size(), const_cast<char*>(k.data())};
    MDB_val val{v.size(), const_cast<char*>(v.data())};
    mdb_ok(mdb_put(txn, dbi, &key, &val, 0), "mdb_put");
  }
  mdb_ok(mdb_txn_commit(txn), "mdb_txn_commit");
  mdb_env_close(env);
}

// Deletes key from the environment at path (used to change a shard behind a reader's back).
inline void delete_key(const std::filesystem::path& path, const std::string& k) {
  MDB_env* env = nullptr;
  mdb_ok(mdb_env_create(&env), "mdb_env_create");
  mdb_ok(mdb_env_open(env, path.c_str(), 0, 0664), "mdb_env_open");
  MDB_txn* txn = nullptr;
  mdb_ok(mdb_txn_begin(env, nullptr, 0, &txn), "mdb_txn_begin");
  MDB_dbi dbi = 0;
  mdb_ok(mdb_dbi_open(txn, nullptr, 0, &dbi), "mdb_dbi_open");
  MDB_val key{k.size(), const_cast<char*>(k.data())};
  mdb_ok(mdb_del(txn, dbi, &key, nullptr), "mdb_del");
  mdb_ok(mdb_txn_commit(txn), "mdb_txn_commit");
  mdb_env_close(env);
}

inline std::string key8(std::uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08llu", static_cast<unsigned long long>(i));
  return buf;
}

inline std::string random_bytes(std::mt19937_64& rng, std::size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

inline std::vector<std::byte> as_bytes_vec(const std::string& s) {
  std::vector<std::byte> v(s.size());
  if (!s.empty()) std::memcpy(v.data(), s.data(), s.size());
  return v;
}

inline std::string as_string(std::span<const std::byte> s) {
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

}  // namespace gpufeed::test
