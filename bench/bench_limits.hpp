// gpufeed-bench: the machine's limits, measured in the same run as the loaders.
//   pinned H2D      cudaMemcpyAsync from pinned memory, 16 MiB and 256 MiB copies (device only)
//   pread           T threads pread random records of the HDF5 contiguous file (its record size,
//                   at the dataset's byte offset) into a batch-sized buffer each (pinned on the
//                   device target): the ceiling for hdf5_source
//   mmap            T threads memcpy random records out of a read-only map of the same file (every
//                   page touched first): the ceiling for hdf5_source reading through its map,
//                   the host's parallel copy rate for that record size
//   lmdb raw        T threads: mdb_get of a random key + memcpy of the value into the buffer, one
//                   read transaction per thread, map populated first: the ceiling for lmdb_source
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <hdf5.h>
#include <lmdb.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_data.hpp"
#include "bench_result.hpp"
#include "gpufeed/memory.hpp"

namespace bench {

// Runs read_one(state, record, dst) on `threads` threads over random records of [0, n) for about
// `seconds`; returns records read and the wall time from start to the last thread's end.
template <class MakeState, class ReadOne>
std::pair<std::uint64_t, double> timed_parallel(unsigned threads, double seconds, std::uint64_t n,
                                                std::size_t record_bytes, std::size_t buffer_bytes,
                                                std::pmr::memory_resource* mr, MakeState make,
                                                ReadOne read_one) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> total{0};
  std::latch ready(threads + 1);
  std::vector<std::string> errors(threads);
  std::vector<std::jthread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      bool counted = false;
      try {
        auto state = make();
        gpufeed::resource_buffer buf(mr, buffer_bytes);
        std::uint64_t rng = 0x9e37 + t * 7919ull, done = 0;
        ready.count_down();
        counted = true;
        ready.wait();
        std::size_t at = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          for (int k = 0; k < 32; ++k) {
            read_one(state, splitmix64(rng) % n, buf.data() + at);
            at = at + 2 * record_bytes > buffer_bytes ? 0 : at + record_bytes;
          }
          done += 32;
        }
        total += done;
      } catch (const std::exception& e) {
        errors[t] = e.what();
        if (!counted) ready.count_down();
      }
    });
  ready.arrive_and_wait();
  const auto t0 = clock_type::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : pool) th.join();
  const double s = seconds_since(t0);
  for (const auto& e : errors)
    if (!e.empty()) fail(e);
  return {total.load(), s};
}

inline result limit_result(const std::string& kind, const dataset& d, unsigned threads,
                           std::uint64_t records, double seconds, const params& p) {
  result r;
  r.case_name = "limit/" + kind + "/" + size_name(d.record_bytes) + "/t" + std::to_string(threads);
  r.loader = "limit:" + kind;
  r.target = p.target();
  r.dataset = d.name();
  r.format = format_name(d.fmt);
  r.order = "random";
  r.record_bytes = d.record_bytes;
  r.workers = threads;
  r.records = records;
  r.bytes = records * d.record_bytes;
  r.seconds = seconds;
  return r;
}

// Byte offset of the contiguous dataset "data" in its file.
inline std::uint64_t hdf5_data_offset(const fs::path& file) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) fail("cannot open " + file.string());
  const hid_t d = H5Dopen2(f, "data", H5P_DEFAULT);
  const haddr_t at = d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF;
  if (d >= 0) H5Dclose(d);
  H5Fclose(f);
  if (at == HADDR_UNDEF) fail("no contiguous dataset 'data' in " + file.string());
  return static_cast<std::uint64_t>(at);
}

inline result limit_pread(const dataset& d, unsigned threads, const params& p,
                          std::pmr::memory_resource* mr) {
  const std::uint64_t base = hdf5_data_offset(d.path);
  const int fd = ::open(d.path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open " + d.path.string());
  const std::size_t rec = d.record_bytes;
  try {
    auto [n, s] = timed_parallel(
        threads, p.case_seconds, d.records, rec, std::max(rec, p.batch_bytes), mr,
        [] { return 0; },
        [&](int&, std::uint64_t i, std::byte* dst) {
          const auto at = static_cast<off_t>(base + i * rec);
          if (::pread(fd, dst, rec, at) != static_cast<ssize_t>(rec)) fail("short pread");
        });
    ::close(fd);
    return limit_result("pread", d, threads, n, s, p);
  } catch (...) {
    ::close(fd);
    throw;
  }
}

inline result limit_mmap(const dataset& d, unsigned threads, const params& p,
                         std::pmr::memory_resource* mr) {
  const std::uint64_t base = hdf5_data_offset(d.path);
  const int fd = ::open(d.path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open " + d.path.string());
  const auto size = static_cast<std::size_t>(::lseek(fd, 0, SEEK_END));
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) fail("cannot map " + d.path.string());
  const auto* bytes = static_cast<const std::byte*>(map);
  for (std::size_t at = 0; at < size; at += 4096)  // every page faulted in before the timing
    (void)*static_cast<const volatile std::byte*>(bytes + at);
  const std::size_t rec = d.record_bytes;
  try {
    auto [n, s] = timed_parallel(
        threads, p.case_seconds, d.records, rec, std::max(rec, p.batch_bytes), mr,
        [] { return 0; },
        [&](int&, std::uint64_t i, std::byte* dst) { std::memcpy(dst, bytes + base + i * rec, rec); });
    ::munmap(map, size);
    return limit_result("mmap", d, threads, n, s, p);
  } catch (...) {
    ::munmap(map, size);
    throw;
  }
}

// One environment for every thread count, its whole map touched first (a cursor walk reading
// one byte per page of every value) so page faults of a fresh mapping are not what is timed —
// the steady state of a run past its first epoch, like gpufeed's LMDB cases (gpufeed_bench.cpp).
inline std::vector<result> limit_lmdb(const dataset& d, const std::vector<std::size_t>& threads,
                                      const params& p, std::pmr::memory_resource* mr) {
  MDB_env* raw = nullptr;
  lmdb_check(mdb_env_create(&raw), "mdb_env_create", d.path);
  std::unique_ptr<MDB_env, void (*)(MDB_env*)> env(raw, mdb_env_close);
  lmdb_check(mdb_env_open(env.get(), d.path.c_str(),
                          MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS | MDB_NORDAHEAD, 0644),
             "mdb_env_open", d.path);
  struct txn_owner {
    MDB_txn* txn = nullptr;
    txn_owner() = default;
    txn_owner(txn_owner&& o) noexcept : txn(std::exchange(o.txn, nullptr)) {}
    ~txn_owner() {
      if (txn) mdb_txn_abort(txn);
    }
  };
  MDB_dbi dbi = 0;
  {
    txn_owner t;
    lmdb_check(mdb_txn_begin(env.get(), nullptr, MDB_RDONLY, &t.txn), "mdb_txn_begin", d.path);
    lmdb_check(mdb_dbi_open(t.txn, nullptr, 0, &dbi), "mdb_dbi_open", d.path);
    MDB_cursor* c = nullptr;
    lmdb_check(mdb_cursor_open(t.txn, dbi, &c), "mdb_cursor_open", d.path);
    MDB_val k{}, v{};
    unsigned sum = 0;
    while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0)
      for (std::size_t at = 0; at < v.mv_size; at += 4096)
        sum += static_cast<const unsigned char*>(v.mv_data)[at];
    mdb_cursor_close(c);
    sink.fetch_add(sum, std::memory_order_relaxed);
  }
  const std::size_t rec = d.record_bytes;
  std::vector<result> out;
  for (std::size_t t : threads) {
    auto [n, s] = timed_parallel(
        static_cast<unsigned>(t), p.case_seconds, d.records, rec, std::max(rec, p.batch_bytes), mr,
        [&] {
          txn_owner o;
          lmdb_check(mdb_txn_begin(env.get(), nullptr, MDB_RDONLY, &o.txn), "mdb_txn_begin",
                     d.path);
          return o;
        },
        [&](txn_owner& o, std::uint64_t i, std::byte* dst) {
          char key[24];
          const int len =
              std::snprintf(key, sizeof key, "%010llu", static_cast<unsigned long long>(i));
          MDB_val k{static_cast<std::size_t>(len), key}, v{};
          lmdb_check(mdb_get(o.txn, dbi, &k, &v), "mdb_get", d.path);
          if (v.mv_size != rec) fail("lmdb value of the wrong size in " + d.path.string());
          std::memcpy(dst, v.mv_data, rec);
        });
    out.push_back(limit_result("lmdb_raw", d, static_cast<unsigned>(t), n, s, p));
  }
  return out;
}

inline result limit_pinned_h2d(gpu& g, std::size_t bytes, const params& p) {
  const int reps = bytes >= (std::size_t{256} << 20) ? 8 : 64;
  const double gbps = g.pinned_h2d_gbps(bytes, reps);
  result r;
  r.case_name = "limit/pinned_h2d/" + size_name(bytes);
  r.loader = "limit:pinned_h2d";
  r.target = p.target();
  r.order = "sequential";
  r.batch_size = 1;
  r.batches = static_cast<std::uint64_t>(reps);
  r.records = static_cast<std::uint64_t>(reps);
  r.record_bytes = bytes;
  r.bytes = bytes * static_cast<std::uint64_t>(reps);
  r.seconds = gbps > 0 ? static_cast<double>(r.bytes) / (gbps * 1e9) : 0.0;
  r.pinned_bytes = bytes;
  r.extra["copy_bytes"] = bytes;
  return r;
}

}  // namespace bench
