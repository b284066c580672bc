// gpufeed-bench's command line: options, their defaults, and the --quick / --tiny presets.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

namespace bench {

struct options {
  std::string target = "auto";
  int device = 0;
  std::string data_dir = "gpufeed-bench-data";
  bool quick = false, tiny = false, json = false, prepare_only = false;
  std::string trace, peer;
  std::vector<std::size_t> record_sizes{1024, 16384, 262144};
  std::vector<std::string> formats{"hdf5", "hdf5-deflate", "lmdb"};
  // Orders swept on the uncompressed (hdf5, lmdb) data sets; hdf5-deflate runs sequential.
  std::vector<std::string> orders{"shuffled"};
  // How the hdf5 data sets are read (hdf5_options::reads): automatic, pread, map; each one given
  // is swept (its results' format: hdf5, hdf5-pread, hdf5-map).
  std::vector<std::string> hdf5_reads{"automatic"};
  std::vector<std::size_t> workers{1, 2, 4, 8, 12, 16}, prefetch{2, 4, 8};
  std::size_t streams = 2;
  double dataset_mib = 1280, batch_mib = 8, case_seconds = 1.5;
  std::uint64_t naive_files = 65536, epochs = 20, epoch_records = 2048;
  std::vector<std::size_t> overlap_sizes{16384};
  std::size_t repeats = 3;                           // runs of each headline and naive case
  std::vector<std::size_t> naive_threads{4, 16};     // the multi-threaded naive loop's counts
  std::vector<std::string> skip;
};

// --quick and --tiny change the defaults of options not given on the command line.
inline void apply_presets(options& o, const CLI::App& app) {
  auto unset = [&](const char* name) { return app.count(name) == 0; };
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  if (o.tiny) {
    if (unset("--dataset-mib")) o.dataset_mib = 2;
    if (unset("--batch-mib")) o.batch_mib = 0.25;
    if (unset("--case-seconds")) o.case_seconds = 0.05;
    if (unset("--workers")) o.workers = {1, 2};
    if (unset("--prefetch")) o.prefetch = {2};
    if (unset("--naive-files")) o.naive_files = 256;
    if (unset("--epoch-records")) o.epoch_records = 32;
    if (unset("--repeats")) o.repeats = 2;
    if (unset("--naive-threads")) o.naive_threads = {2};
  } else if (o.quick) {
    if (unset("--dataset-mib")) o.dataset_mib = 64;
    if (unset("--case-seconds")) o.case_seconds = 0.4;
    if (unset("--workers")) o.workers = {1, std::min<std::size_t>(hw, 16)};
    if (unset("--prefetch")) o.prefetch = {4};
    if (unset("--naive-files")) o.naive_files = 16384;
    if (unset("--epoch-records")) o.epoch_records = 512;
  }
  // Worker counts above the hardware threads become the hardware threads (once).
  for (auto* v : {&o.workers, &o.naive_threads}) {
    for (auto& w : *v) w = std::clamp<std::size_t>(w, 1, hw);
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
}

inline void add_options(CLI::App& app, options& o) {
  app.add_option("--target", o.target, "cuda, host, or auto (cuda when a device is usable)")
      ->check(CLI::IsMember({"auto", "cuda", "host"}));
  app.add_option("--device", o.device, "CUDA device id");
  app.add_option("--data-dir", o.data_dir, "where data sets are generated and reused");
  app.add_flag("--quick", o.quick, "small data sets (64 MiB), short cases: under 2 minutes");
  app.add_flag("--tiny", o.tiny, "a few MiB, for the smoke test")->group("");
  app.add_flag("--json", o.json, "print a JSON array of cases on stdout (the rest on stderr)");
  app.add_option("--trace", o.trace, "write the balanced overlap run's Chrome trace here");
  app.add_option("--peer", o.peer, "JSON from bench/peers/pytorch_dataloader.py, to compare");
  app.add_option("--record-sizes", o.record_sizes, "record sizes in bytes")->delimiter(',');
  app.add_option("--formats", o.formats, "hdf5, hdf5-deflate, lmdb")->delimiter(',')
      ->check(CLI::IsMember({"hdf5", "hdf5-deflate", "lmdb"}));
  app.add_option("--orders", o.orders,
                 "orders swept on the hdf5 and lmdb data sets (default shuffled; hdf5-deflate "
                 "runs sequential)")
      ->delimiter(',')->check(CLI::IsMember({"shuffled", "sequential", "block_shuffled"}));
  app.add_option("--hdf5-reads", o.hdf5_reads,
                 "how the hdf5 data sets are read, each swept: automatic (default; a memory map "
                 "for uncompressed data), pread, map")
      ->delimiter(',')->check(CLI::IsMember({"automatic", "pread", "map"}));
  app.add_option("--workers", o.workers, "worker counts (capped at hardware threads)")->delimiter(',');
  app.add_option("--prefetch", o.prefetch, "prefetch depths")->delimiter(',');
  app.add_option("--streams", o.streams, "CUDA streams per loader")->check(CLI::Range(1, 32));
  app.add_option("--dataset-mib", o.dataset_mib, "MiB per data set (default 1280)")->check(CLI::PositiveNumber);
  app.add_option("--batch-mib", o.batch_mib, "MiB of records per batch (default 8)")->check(CLI::PositiveNumber);
  app.add_option("--case-seconds", o.case_seconds, "timed seconds per case")->check(CLI::PositiveNumber);
  app.add_option("--naive-files", o.naive_files, "at most this many one-record files per size")
      ->check(CLI::PositiveNumber);
  app.add_option("--epochs", o.epochs, "epochs of the pinned-memory case")->check(CLI::Range(1, 1000));
  app.add_option("--epoch-records", o.epoch_records, "16 KiB records in the pinned-memory case")
      ->check(CLI::Range(4, 1 << 24));
  app.add_option("--overlap-sizes", o.overlap_sizes, "record sizes of the overlap cases")->delimiter(',');
  app.add_option("--repeats", o.repeats,
                 "runs of the best configuration per HDF5/LMDB data set and order and of each "
                 "naive case; median and range reported (default 3; 1: single runs, no repeats)")
      ->check(CLI::Range(1, 99));
  app.add_option("--naive-threads", o.naive_threads,
                 "thread counts of the multi-threaded naive batch loop (default 4,16; capped)")
      ->delimiter(',');
  app.add_flag("--prepare-only", o.prepare_only, "generate the data sets and exit");
  app.add_option("--skip", o.skip, "skip parts: limits, naive, overlap, first-batch, epochs")
      ->delimiter(',')->check(CLI::IsMember({"limits", "naive", "overlap", "first-batch", "epochs"}));
}

}  // namespace bench
