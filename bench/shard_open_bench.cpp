// shard_open_bench: opening 1,000 small shards on one file system, eagerly (every shard at
// construction, as every rank did before lazy opening) against lazily (the first at
// construction, others on first use), for rank R of W reading the records of its block of the
// record space: HDF5 (hdf5_source) and LMDB (lmdb_source) shards. Reports wall time and this
// process's descriptors on the shards, after construction and after the partition was read,
// with the eager/lazy ratios of one run.
//
// A rank taking interleaved batches of one global sequence touches every shard over an epoch:
// lazy opening then bounds the time and descriptors at start, not over the epoch (row "lazy,
// shuffled+inter.").
//
//   shard_open_bench [--shards 1000] [--records 64] [--rank 3] [--world 8] [--dir DIR]
//
// Shards are written once (HDF5: blob layout, LMDB: raw values; `records` records of 16-80
// bytes each) with pack's manifest beside them; the "header reads" / "scans" rows remove the
// manifest, so each shard's record count comes from opening it (and closing it) at
// construction. The block_shuffled rows time what a loader plans at construction before its
// threads start (loading::resolve_config: the order's units over the whole source and the median
// decode unit length) over 1,000 fixed-layout, deflated HDF5 shards (64 rows of 16 KiB, chunks
// of 16 rows: a unit is about a shard), with a manifest stating band heights and with an older
// one that does not.
// Files are in the page cache: this measures opening (superblock, index, descriptors), not
// storage.
#include <hdf5.h>
#include <lmdb.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/pack/detail/manifest.hpp"

namespace loading = gpufeed::detail::loading;

namespace fs = std::filesystem;
using clk = std::chrono::steady_clock;

namespace {

std::uint64_t write_shard(const fs::path& p, std::uint64_t records, std::uint64_t seed) {
  std::vector<std::uint8_t> data;
  std::vector<std::uint64_t> off{0};
  std::uint64_t max = 0;
  for (std::uint64_t r = 0; r < records; ++r) {
    const std::uint64_t n = 16 + (seed * 31 + r * 17) % 65;
    for (std::uint64_t j = 0; j < n; ++j) data.push_back(static_cast<std::uint8_t>(seed + r + j));
    off.push_back(data.size());
    max = std::max(max, n);
  }
  const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  auto put = [&](const char* name, hid_t type, const void* buf, hsize_t n) {
    const hid_t sp = H5Screate_simple(1, &n, nullptr);
    const hid_t d = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, type == H5T_STD_U64LE ? H5T_NATIVE_UINT64 : H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL,
             H5P_DEFAULT, buf);
    H5Dclose(d);
    H5Sclose(sp);
  };
  put("data", H5T_NATIVE_UINT8, data.data(), data.size());
  put("offsets", H5T_STD_U64LE, off.data(), off.size());
  H5Fclose(f);
  return max;
}

// An LMDB shard (a directory, no lock file used by readers) of the same records as write_shard.
std::uint64_t write_lmdb_shard(const fs::path& p, std::uint64_t records, std::uint64_t seed) {
  fs::create_directories(p);
  MDB_env* env = nullptr;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  mdb_env_create(&env);
  mdb_env_set_mapsize(env, std::size_t{1} << 20);
  mdb_env_open(env, p.c_str(), 0, 0664);
  mdb_txn_begin(env, nullptr, 0, &txn);
  mdb_dbi_open(txn, nullptr, MDB_CREATE, &dbi);
  std::uint64_t max = 0;
  for (std::uint64_t r = 0; r < records; ++r) {
    const std::uint64_t n = 16 + (seed * 31 + r * 17) % 65;
    std::vector<std::uint8_t> v(n);
    for (std::uint64_t j = 0; j < n; ++j) v[j] = static_cast<std::uint8_t>(seed + r + j);
    char key[24];
    std::snprintf(key, sizeof key, "%08llu", static_cast<unsigned long long>(r));
    MDB_val k{8, key}, val{n, v.data()};
    mdb_put(txn, dbi, &k, &val, 0);
    max = std::max(max, n);
  }
  mdb_txn_commit(txn);
  mdb_env_close(env);
  fs::remove(p / "lock.mdb");
  return max;
}

// A fixed-layout shard: `records` rows of fixed_row bytes, deflate level 1 in chunks of 16 rows.
constexpr std::size_t fixed_row = 16384;  // a storage block (1 MiB) is 64 rows: about a shard
void write_fixed_shard(const fs::path& p, std::uint64_t records, std::uint64_t seed) {
  std::vector<std::uint8_t> data(records * fixed_row);
  for (std::size_t j = 0; j < data.size(); ++j) data[j] = static_cast<std::uint8_t>(seed + j / 7);
  const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {records, fixed_row}, chunk[2] = {16, fixed_row};
  const hid_t sp = H5Screate_simple(2, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 2, chunk);
  H5Pset_deflate(dcpl, 1);
  const hid_t d = H5Dcreate2(f, "data", H5T_NATIVE_UINT8, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(sp);
  H5Fclose(f);
}

int fds_under(const fs::path& dir) {
  int n = 0;
  std::error_code ec;
  for (fs::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    const auto t = fs::read_symlink(it->path(), ec);
    if (!ec && t.string().rfind(dir.string(), 0) == 0) ++n;
  }
  return n;
}

struct result {
  double open_ms = 0, partition_ms = 0;
  int fds_open = 0, fds_partition = 0;
  std::size_t opened = 0;
};

// interleaved: the rank reads every world-th batch of 256 records of one shuffled global
// sequence (how ranks split an epoch when they take interleaved batches) instead of its block.
template <class Source, class Options>
result run(const std::vector<fs::path>& paths, const fs::path& dir, Options o, int rank,
           int world, bool interleaved = false) {
  result r;
  const auto t0 = clk::now();
  Source src(paths, o);
  r.open_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  r.fds_open = fds_under(dir);
  const std::uint64_t n = src.size();
  const std::uint64_t lo = n * rank / world, hi = n * (rank + 1) / world;
  std::vector<std::byte> buf(src.max_record_size());
  auto reader = src.make_reader();
  std::uint64_t sum = 0;
  for (std::uint64_t i = interleaved ? 0 : lo; i < (interleaved ? n : hi); ++i) {
    if (interleaved && (i / 256) % static_cast<std::uint64_t>(world) !=
                           static_cast<std::uint64_t>(rank))
      continue;
    // Interleaved over a shuffled sequence: position i holds record i * 7919 mod n (7919 is
    // prime and divides no record count used here, so that is a permutation).
    const std::uint64_t rec = interleaved ? i * 7919 % n : i;
    reader.read(rec, std::span(buf.data(), src.record_size(rec)));
    sum += static_cast<std::uint64_t>(buf[0]);
  }
  r.partition_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  r.fds_partition = fds_under(dir);
  r.opened = src.shards_opened();
  if (sum == 42) std::puts("");  // keep the reads
  return r;
}

// A lazily opened source and what a block_shuffled loader plans at construction: time and
// shards opened (the loader's threads, which would start reading, are not started).
result plan_block_shuffled(const std::vector<fs::path>& paths, const fs::path& dir) {
  result r;
  const auto t0 = clk::now();
  gpufeed::hdf5_source src(paths);
  gpufeed::loader_config c;
  c.batch_size = 64;
  c.order = gpufeed::sample_order::block_shuffled;
  c.part = gpufeed::partition{};
  const auto setup = loading::resolve_config<gpufeed::default_options>(src, c);
  r.open_ms = r.partition_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  r.fds_open = r.fds_partition = fds_under(dir);
  r.opened = src.shards_opened();
  if (setup.order.units().size() == 0) std::puts("no units");
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int shards = 1000, rank = 3, world = 8;
  std::uint64_t records = 64;
  fs::path dir = fs::temp_directory_path() / "gpufeed-shard-open-bench";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--shards") shards = std::atoi(argv[i + 1]);
    else if (a == "--records") records = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--rank") rank = std::atoi(argv[i + 1]);
    else if (a == "--world") world = std::atoi(argv[i + 1]);
    else if (a == "--dir") dir = argv[i + 1];
  }
  fs::remove_all(dir);
  fs::create_directories(dir);
  dir = fs::canonical(dir);
  gpufeed::detail::pack::manifest_data m, lm, fm;
  m.format = "hdf5";
  lm.format = "lmdb";
  fm.format = "hdf5";
  std::vector<fs::path> paths, lpaths, fpaths;
  fs::create_directories(dir / "lmdb");
  fs::create_directories(dir / "fixed");
  for (int k = 0; k < shards; ++k) {
    char name[32];
    std::snprintf(name, sizeof name, "b-%05d.h5", k);
    paths.push_back(dir / name);
    gpufeed::detail::pack::manifest_shard s;
    s.file = name;
    s.records = records;
    s.first_record = static_cast<std::uint64_t>(k) * records;
    s.max_record = write_shard(paths.back(), records, static_cast<std::uint64_t>(k));
    s.min_record = 16;  // not used by hdf5_source
    m.shards.push_back(s);
    std::snprintf(name, sizeof name, "b-%05d.lmdb", k);
    lpaths.push_back(dir / "lmdb" / name);
    s.file = name;
    s.max_record = write_lmdb_shard(lpaths.back(), records, static_cast<std::uint64_t>(k));
    s.min_record = s.max_record;
    for (std::uint64_t r = 0; r < records; ++r)
      s.min_record = std::min<std::uint64_t>(s.min_record, 16 + (k * 31 + r * 17) % 65);
    lm.shards.push_back(s);
    std::snprintf(name, sizeof name, "f-%05d.h5", k);
    fpaths.push_back(dir / "fixed" / name);
    write_fixed_shard(fpaths.back(), records, static_cast<std::uint64_t>(k));
    s.file = name;
    s.max_record = s.min_record = fixed_row;
    s.band_rows = 16;
    fm.shards.push_back(s);
  }
  const std::string manifest = gpufeed::detail::pack::manifest_text(m);
  std::printf("%d shards of %llu records, rank %d of %d reads records [%llu, %llu) (block split)\n",
              shards, static_cast<unsigned long long>(records), rank, world,
              static_cast<unsigned long long>(shards * records * rank / world),
              static_cast<unsigned long long>(shards * records * (rank + 1) / world));
  using gpufeed::hdf5_source;
  using gpufeed::lmdb_source;
  gpufeed::hdf5_options eager, lazy;
  eager.open = gpufeed::hdf5_options::open_kind::eager;
  gpufeed::lmdb_options leager, llazy;
  leager.open = gpufeed::lmdb_options::open_kind::eager;
  // Warm-up: every file in the page cache, HDF5 initialised.
  (void)run<hdf5_source>(paths, dir, eager, rank, world);
  (void)run<lmdb_source>(lpaths, dir, leager, rank, world);
  (void)run<hdf5_source>(fpaths, dir, eager, rank, world);
  struct row {
    const char* name;
    result r;
  } rows[10];
  std::ofstream(dir / "manifest.json") << manifest;
  std::ofstream(dir / "lmdb" / "manifest.json") << gpufeed::detail::pack::manifest_text(lm);
  std::ofstream(dir / "fixed" / "manifest.json") << gpufeed::detail::pack::manifest_text(fm);
  rows[0] = {"hdf5 eager", run<hdf5_source>(paths, dir, eager, rank, world)};
  rows[1] = {"hdf5 lazy, manifest", run<hdf5_source>(paths, dir, lazy, rank, world)};
  rows[3] = {"hdf5 lazy, shuf.+inter.", run<hdf5_source>(paths, dir, lazy, rank, world, true)};
  rows[4] = {"lmdb eager", run<lmdb_source>(lpaths, dir, leager, rank, world)};
  rows[5] = {"lmdb lazy, manifest", run<lmdb_source>(lpaths, dir, llazy, rank, world)};
  rows[7] = {"lmdb lazy, shuf.+inter.", run<lmdb_source>(lpaths, dir, llazy, rank, world, true)};
  rows[8] = {"block_shuffled, bands", plan_block_shuffled(fpaths, dir)};
  fs::remove(dir / "manifest.json");
  fs::remove(dir / "lmdb" / "manifest.json");
  rows[2] = {"hdf5 lazy, header reads", run<hdf5_source>(paths, dir, lazy, rank, world)};
  rows[6] = {"lmdb lazy, scans", run<lmdb_source>(lpaths, dir, llazy, rank, world)};
  // An older manifest (no band_rows): unit boundaries need the shards opened.
  for (auto& s : fm.shards) s.band_rows.reset();
  std::ofstream(dir / "fixed" / "manifest.json", std::ios::trunc)
      << gpufeed::detail::pack::manifest_text(fm);
  rows[9] = {"block_shuffled, no bands", plan_block_shuffled(fpaths, dir)};
  std::printf("%-24s %12s %10s %16s %12s %12s\n", "mode", "open ms", "fds open",
              "open+part. ms", "fds after", "opened");
  for (const auto& x : rows)
    std::printf("%-24s %12.1f %10d %16.1f %12d %12zu\n", x.name, x.r.open_ms, x.r.fds_open,
                x.r.partition_ms, x.r.fds_partition, x.r.opened);
  std::printf("(shuf.+inter.: manifest; the rank reads every %d-th batch of 256 records of a "
              "shuffled epoch; block_shuffled: source + the loader's construction-time plan over "
              "fixed deflated shards, no reads)\n",
              world);
  const auto ratios = [&](const char* what, int e, int l) {
    std::printf("%s eager / lazy: construction %.1fx, construction + partition %.1fx; "
                "descriptors %d vs %d\n",
                what, rows[e].r.open_ms / rows[l].r.open_ms,
                rows[e].r.partition_ms / rows[l].r.partition_ms, rows[e].r.fds_partition,
                rows[l].r.fds_partition);
  };
  ratios("hdf5 (manifest)", 0, 1);
  ratios("hdf5 (header reads)", 0, 2);
  ratios("lmdb (manifest)", 4, 5);
  ratios("lmdb (scans)", 4, 6);
  std::printf("block_shuffled plan: bands from the manifest %.1f ms (%zu opened) vs without "
              "%.1f ms (%zu opened)\n",
              rows[8].r.open_ms, rows[8].r.opened, rows[9].r.open_ms, rows[9].r.opened);
  fs::remove_all(dir);
  return 0;
}
