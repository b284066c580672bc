// shard_open_bench: opening 1,000 small HDF5 shards on one file system, eagerly (every shard at
// construction, as every rank did before lazy opening) against lazily (the first at
// construction, others on first use), for rank R of W reading the records of its block of the
// record space. Reports wall time and this process's descriptors on the shards, after
// construction and after the partition was read, with the eager/lazy ratios of one run.
//
// A rank taking interleaved batches of one global sequence touches every shard over an epoch:
// lazy opening then bounds the time and descriptors at start, not over the epoch (row "lazy,
// shuffled+inter.").
//
//   shard_open_bench [--shards 1000] [--records 64] [--rank 3] [--world 8] [--dir DIR]
//
// Shards are written once (blob layout, `records` records of 16-80 bytes each) with pack's
// manifest beside them; "lazy, header reads" removes the manifest, so each shard's record
// count comes from opening its header (and closing it) at construction. Files are in the page
// cache: this measures opening (HDF5 superblock, index, descriptors), not storage.
#include <hdf5.h>

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
#include "gpufeed/pack/detail/manifest.hpp"

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
result run(const std::vector<fs::path>& paths, const fs::path& dir, gpufeed::hdf5_options o,
           int rank, int world, bool interleaved = false) {
  result r;
  const auto t0 = clk::now();
  gpufeed::hdf5_source src(paths, o);
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
  gpufeed::detail::pack::manifest_data m;
  m.format = "hdf5";
  std::vector<fs::path> paths;
  for (int k = 0; k < shards; ++k) {
    char name[32];
    std::snprintf(name, sizeof name, "b-%05d.h5", k);
    paths.push_back(dir / name);
    gpufeed::detail::pack::manifest_shard s;
    s.file = name;
    s.records = records;
    s.first_record = static_cast<std::uint64_t>(k) * records;
    s.max_record = write_shard(paths.back(), records, static_cast<std::uint64_t>(k));
    m.shards.push_back(s);
  }
  const std::string manifest = gpufeed::detail::pack::manifest_text(m);
  std::printf("%d shards of %llu records, rank %d of %d reads records [%llu, %llu) (block split)\n",
              shards, static_cast<unsigned long long>(records), rank, world,
              static_cast<unsigned long long>(shards * records * rank / world),
              static_cast<unsigned long long>(shards * records * (rank + 1) / world));
  gpufeed::hdf5_options eager, lazy;
  eager.open = gpufeed::hdf5_options::open_kind::eager;
  // Warm-up: every file in the page cache, HDF5 initialised.
  (void)run(paths, dir, eager, rank, world);
  struct row {
    const char* name;
    result r;
  } rows[4];
  std::ofstream(dir / "manifest.json") << manifest;
  rows[0] = {"eager", run(paths, dir, eager, rank, world)};
  rows[1] = {"lazy, manifest", run(paths, dir, lazy, rank, world)};
  rows[3] = {"lazy, shuffled+inter.", run(paths, dir, lazy, rank, world, true)};
  fs::remove(dir / "manifest.json");
  rows[2] = {"lazy, header reads", run(paths, dir, lazy, rank, world)};
  std::printf("%-22s %12s %10s %16s %12s %12s\n", "mode", "open ms", "fds open",
              "open+part. ms", "fds after", "opened");
  for (const auto& x : rows)
    std::printf("%-22s %12.1f %10d %16.1f %12d %12zu\n", x.name, x.r.open_ms, x.r.fds_open,
                x.r.partition_ms, x.r.fds_partition, x.r.opened);
  std::printf("(lazy, shuffled+inter.: manifest; the rank reads every %d-th batch of 256 records "
              "of a shuffled epoch)\n",
              world);
  std::printf("eager / lazy (manifest): construction %.1fx, construction + partition %.1fx; "
              "descriptors %d vs %d\n",
              rows[0].r.open_ms / rows[1].r.open_ms,
              rows[0].r.partition_ms / rows[1].r.partition_ms, rows[0].r.fds_partition,
              rows[1].r.fds_partition);
  std::printf("eager / lazy (header reads): construction %.1fx, construction + partition %.1fx\n",
              rows[0].r.open_ms / rows[2].r.open_ms,
              rows[0].r.partition_ms / rows[2].r.partition_ms);
  fs::remove_all(dir);
  return 0;
}
