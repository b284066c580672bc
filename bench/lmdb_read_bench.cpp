// lmdb_read_bench — random-order reads of an LMDB shard of 16 KiB records from the page cache:
// (a) the ceiling, raw mdb_get + memcpy with one read txn per thread, against (b) lmdb_source
// readers, which add the key lookup from the open-time scan, the size check and idle()/renew
// per batch, as the loader uses them.
//
//   lmdb_read_bench [--gib G | --quick] [--record BYTES] [--dir PATH] [--max-threads N]
//                   [--reps R] [--json] [--verbose]
//
// The environment is created once in --dir (default: $TMPDIR/gpufeed-lmdb-bench-<records>x<size>)
// and reused when it already holds the expected records. Each thread reads its share of one
// random permutation of all records into its own 4 MiB slot (256 records per "batch"); the
// figure is the best of --reps timed passes after one untimed pass per method. Besides wall-clock
// GB/s it prints the CPU time the reading threads spent per record (best pass): on a machine
// shared with other work that ratio is the steadier measure of lmdb_source's overhead.
#include <lmdb.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/lmdb_source.hpp"

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
  double gib = 2.0;
  std::size_t record = 16384;
  fs::path dir;
  unsigned max_threads = std::max(1u, std::thread::hardware_concurrency());
  int reps = 3;
  bool json = false;
  bool verbose = false;  // every timed pass on stderr
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "lmdb_read_bench: %s\n", what.c_str());
  std::exit(1);
}
void ok(int rc, const char* api) {
  if (rc != MDB_SUCCESS) die(std::string(api) + ": " + mdb_strerror(rc));
}
std::string key_of(std::uint64_t i) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%012llu", static_cast<unsigned long long>(i));
  return buf;
}

// Writes `n` records of `size` pseudo-random bytes with keys %012llu (MDB_APPEND).
void create_env(const fs::path& dir, std::uint64_t n, std::size_t size) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  MDB_env* env = nullptr;
  ok(mdb_env_create(&env), "mdb_env_create");
  const std::size_t pages_per_record = (size + 16 + 4095) / 4096 + 1;
  ok(mdb_env_set_mapsize(env, n * pages_per_record * 4096 + (64u << 20)), "mdb_env_set_mapsize");
  ok(mdb_env_open(env, dir.c_str(), MDB_NOSYNC | MDB_WRITEMAP | MDB_MAPASYNC, 0664), "mdb_env_open");
  std::vector<char> value(size);
  std::uint64_t state = 12345;
  MDB_dbi dbi = 0;
  for (std::uint64_t i = 0; i < n;) {
    MDB_txn* txn = nullptr;
    ok(mdb_txn_begin(env, nullptr, 0, &txn), "mdb_txn_begin");
    ok(mdb_dbi_open(txn, nullptr, MDB_CREATE, &dbi), "mdb_dbi_open");
    for (std::uint64_t end = std::min(n, i + 4096); i < end; ++i) {
      for (std::size_t b = 0; b + 8 <= size; b += 8) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        std::memcpy(value.data() + b, &state, 8);
      }
      const std::string k = key_of(i);
      MDB_val key{k.size(), const_cast<char*>(k.data())};
      MDB_val val{size, value.data()};
      ok(mdb_put(txn, dbi, &key, &val, MDB_APPEND), "mdb_put");
    }
    ok(mdb_txn_commit(txn), "mdb_txn_commit");
  }
  ok(mdb_env_sync(env, 1), "mdb_env_sync");
  mdb_env_close(env);
}

// Reads the data file once so the runs measure page-cache reads, not the disk.
void warm_page_cache(const fs::path& file) {
  std::ifstream f(file, std::ios::binary);
  std::vector<char> buf(8 << 20);
  while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0) {
  }
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Wall seconds of a pass, and the CPU seconds its threads spent (the CPU figure is what to
// compare on a machine shared with other work: it does not count time spent descheduled).
struct pass_time {
  double wall = 0, cpu = 0;
};

// Runs body(first, last) on `threads` threads over [0, n) split evenly.
template <class Body>
pass_time timed(unsigned threads, std::uint64_t n, Body&& body) {
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> cpu(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const double c0 = thread_cpu_seconds();
      body(n * t / threads, n * (t + 1) / threads);
      cpu[t] = thread_cpu_seconds() - c0;
    });
  while (ready.load() < threads) std::this_thread::yield();
  const auto start = clock_type::now();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  pass_time p;
  p.wall = std::chrono::duration<double>(clock_type::now() - start).count();
  for (double c : cpu) p.cpu += c;
  return p;
}

constexpr std::size_t slot_records = 256;

// (a) raw LMDB: its own env with the same flags, one read txn per thread, mdb_get + memcpy.
pass_time run_raw(MDB_env* env, MDB_dbi dbi, const std::vector<std::uint64_t>& order,
                  const std::vector<std::string>& keys, std::size_t size, unsigned threads) {
  return timed(threads, order.size(), [&](std::uint64_t first, std::uint64_t last) {
    std::vector<char> slot(slot_records * size);
    MDB_txn* txn = nullptr;
    ok(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), "mdb_txn_begin");
    for (std::uint64_t j = first; j < last; ++j) {
      const std::string& k = keys[order[j]];
      MDB_val key{k.size(), const_cast<char*>(k.data())}, val{};
      ok(mdb_get(txn, dbi, &key, &val), "mdb_get");
      std::memcpy(slot.data() + (j % slot_records) * size, val.mv_data, val.mv_size);
    }
    mdb_txn_abort(txn);
  });
}

// (b) lmdb_source: one reader per thread, idle() after every slot (the loader's batch).
pass_time run_source(const gpufeed::lmdb_source& src, const std::vector<std::uint64_t>& order,
                     std::size_t size, unsigned threads) {
  return timed(threads, order.size(), [&](std::uint64_t first, std::uint64_t last) {
    std::vector<std::byte> slot(slot_records * size);
    auto reader = src.make_reader();
    for (std::uint64_t j = first; j < last; ++j) {
      const std::size_t at = (j % slot_records) * size;
      reader.read(order[j], std::span<std::byte>(slot).subspan(at, size));
      if (j % slot_records == slot_records - 1) reader.idle();
    }
    reader.idle();
  });
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--gib") o.gib = std::stod(value());
    else if (a == "--quick") o.gib = 0.25;
    else if (a == "--record") o.record = std::stoul(value());
    else if (a == "--dir") o.dir = value();
    else if (a == "--max-threads") o.max_threads = static_cast<unsigned>(std::stoul(value()));
    else if (a == "--reps") o.reps = std::stoi(value());
    else if (a == "--json") o.json = true;
    else if (a == "--verbose") o.verbose = true;
    else die("unknown argument " + a + " (see the comment at the top of lmdb_read_bench.cpp)");
  }
  if (o.record == 0 || o.gib <= 0 || o.max_threads == 0 || o.reps < 1) die("bad arguments");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  options o = parse(argc, argv);
  const auto n = static_cast<std::uint64_t>(o.gib * double(1ull << 30) / double(o.record));
  if (n == 0) die("--gib too small for one record");
  if (o.dir.empty())
    o.dir = fs::temp_directory_path() /
            ("gpufeed-lmdb-bench-" + std::to_string(n) + "x" + std::to_string(o.record));

  bool reuse = false;
  try {
    const gpufeed::lmdb_source probe(o.dir);
    reuse = probe.size() == n && probe.fixed_record_size() == o.record;
  } catch (const gpufeed::error&) {
  }
  if (!reuse) {
    std::fprintf(stderr, "creating %llu records of %zu bytes in %s\n",
                 static_cast<unsigned long long>(n), o.record, o.dir.c_str());
    create_env(o.dir, n, o.record);
  }
  warm_page_cache(o.dir / "data.mdb");

  const auto open_start = clock_type::now();
  const gpufeed::lmdb_source src(o.dir);
  const double open_s = std::chrono::duration<double>(clock_type::now() - open_start).count();

  MDB_env* env = nullptr;
  ok(mdb_env_create(&env), "mdb_env_create");
  ok(mdb_env_set_mapsize(env, fs::file_size(o.dir / "data.mdb")), "mdb_env_set_mapsize");
  ok(mdb_env_open(env, o.dir.c_str(), MDB_RDONLY | MDB_NOTLS | MDB_NORDAHEAD | MDB_NOLOCK, 0664),
     "mdb_env_open");
  MDB_dbi dbi = 0;
  {
    MDB_txn* txn = nullptr;
    ok(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), "mdb_txn_begin");
    ok(mdb_dbi_open(txn, nullptr, 0, &dbi), "mdb_dbi_open");
    ok(mdb_txn_commit(txn), "mdb_txn_commit");
  }
  std::vector<std::string> keys(n);
  for (std::uint64_t i = 0; i < n; ++i) keys[i] = key_of(i);
  std::vector<std::uint64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));

  std::vector<unsigned> counts;
  for (unsigned t = 1; t < o.max_threads; t *= 2) counts.push_back(t);
  counts.push_back(o.max_threads);

  const double bytes = double(n) * double(o.record);
  if (!o.json)
    std::printf("LMDB random reads: %llu records x %zu B (%.2f GiB), open+scan %.1f ms, %u cores\n"
                "%8s %16s %16s %8s %14s %14s %8s\n",
                static_cast<unsigned long long>(n), o.record, bytes / double(1ull << 30),
                open_s * 1e3, std::thread::hardware_concurrency(), "threads", "raw GB/s",
                "lmdb_source GB/s", "ratio", "raw cpu ns/rec", "src cpu ns/rec", "cpu ratio");
  else
    std::printf("[\n");
  for (std::size_t c = 0; c < counts.size(); ++c) {
    const unsigned t = counts[c];
    run_raw(env, dbi, order, keys, o.record, t);  // untimed: map faults, caches
    run_source(src, order, o.record, t);
    pass_time raw{1e300, 1e300}, lib{1e300, 1e300};
    for (int r = 0; r < o.reps; ++r) {  // interleaved so drift affects both alike
      const pass_time a = run_raw(env, dbi, order, keys, o.record, t);
      const pass_time b = run_source(src, order, o.record, t);
      if (o.verbose)
        std::fprintf(stderr, "threads %u pass %d: raw %.2f GB/s %.0f cpu ns/rec, lmdb_source %.2f "
                     "GB/s %.0f cpu ns/rec\n", t, r, bytes / a.wall / 1e9, a.cpu / double(n) * 1e9,
                     bytes / b.wall / 1e9, b.cpu / double(n) * 1e9);
      raw = {std::min(raw.wall, a.wall), std::min(raw.cpu, a.cpu)};
      lib = {std::min(lib.wall, b.wall), std::min(lib.cpu, b.cpu)};
    }
    const double raw_gbs = bytes / raw.wall / 1e9, lib_gbs = bytes / lib.wall / 1e9;
    const double raw_ns = raw.cpu / double(n) * 1e9, lib_ns = lib.cpu / double(n) * 1e9;
    if (!o.json)
      std::printf("%8u %16.2f %16.2f %8.3f %14.0f %14.0f %8.3f\n", t, raw_gbs, lib_gbs,
                  lib_gbs / raw_gbs, raw_ns, lib_ns, raw_ns / lib_ns);
    else
      std::printf("  {\"threads\": %u, \"records\": %llu, \"record_bytes\": %zu, "
                  "\"raw_mdb_get_gbps\": %.3f, \"lmdb_source_gbps\": %.3f, \"ratio\": %.4f, "
                  "\"raw_cpu_ns_per_record\": %.1f, \"lmdb_source_cpu_ns_per_record\": %.1f, "
                  "\"cpu_ratio\": %.4f, \"open_ms\": %.2f}%s\n",
                  t, static_cast<unsigned long long>(n), o.record, raw_gbs, lib_gbs,
                  lib_gbs / raw_gbs, raw_ns, lib_ns, raw_ns / lib_ns, open_s * 1e3,
                  c + 1 < counts.size() ? "," : "");
  }
  if (o.json) std::printf("]\n");
  mdb_env_close(env);
  return 0;
}
