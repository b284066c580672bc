// codec_bench — per-codec decode rates of HDF5 shards on gpufeed's fast path.
//
// usage: codec_bench [--workers N] [--seconds S] FILE.h5...
//
// For each file (dataset "data"): the single-thread rate (one reader, records in order, so each
// chunk is decoded once: this is the decode rate of those chunks, plus one copy), then the
// loader's rate with N workers in sequential order on the same file, to host memory. Rates are
// decoded bytes per second; each pass repeats over the file until S seconds have passed, and
// starts with the source's shared decoded-chunk cache emptied, so every pass decodes.
// Fixtures: tests/hdf5/make_codec_fixtures.py OUT_DIR SCALE writes one file per codec, SCALE
// times the rows of the test files.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double single_thread_gbs(const gpufeed::hdf5_source& src, double budget) {
  std::vector<std::byte> buf(src.max_record_size());
  double bytes = 0;
  const auto t0 = clock_type::now();
  do {
    src.drop_decoded_chunks();  // each pass decodes: the source's shared cache would serve it
    auto r = src.make_reader();
    for (std::uint64_t i = 0; i < src.size(); ++i) {
      r.read(i, buf);
      bytes += static_cast<double>(src.record_size(i));
    }
  } while (seconds_since(t0) < budget);
  return bytes / seconds_since(t0) / 1e9;
}

double loader_gbs(const gpufeed::hdf5_source& src, std::size_t workers, double budget) {
  double bytes = 0;
  const auto t0 = clock_type::now();
  do {
    src.drop_decoded_chunks();  // each pass decodes: the source's shared cache would serve it
    gpufeed::loader_config c;
    c.batch_size = 256;
    c.order = gpufeed::sample_order::sequential;
    c.workers = workers;
    c.prefetch = 2 * workers;
    c.epochs = 1;
    gpufeed::loader<gpufeed::hdf5_source> l(src, c);
    while (auto b = l.next())
      for (std::size_t k = 0; k < b->size(); ++k)
        bytes += static_cast<double>(b->record(k).size());
  } while (seconds_since(t0) < budget);
  return bytes / seconds_since(t0) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t workers = 4;
  double budget = 1.0;
  std::vector<std::string> files;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    if (a == "--workers" && k + 1 < argc) {
      workers = std::strtoul(argv[++k], nullptr, 10);
    } else if (a == "--seconds" && k + 1 < argc) {
      budget = std::strtod(argv[++k], nullptr);
    } else if (a.starts_with("--")) {
      std::fprintf(stderr, "usage: codec_bench [--workers N] [--seconds S] FILE.h5...\n");
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty() || workers == 0) {
    std::fprintf(stderr, "usage: codec_bench [--workers N] [--seconds S] FILE.h5...\n");
    return 2;
  }
  std::printf("%-36s %-22s %-12s %10s %14s %10s\n", "file", "filters", "path", "1 thread",
              "loader", "ratio");
  for (const auto& f : files) {
    try {
      gpufeed::hdf5_source src(f);
      const auto& info = src.shards()[0];
      std::string filters;
      for (const auto& s : info.filters) filters += (filters.empty() ? "" : "+") + s;
      const double one = single_thread_gbs(src, budget);
      const double many = loader_gbs(src, workers, budget);
      std::printf("%-36s %-22s %-12s %7.3f GB/s %5zu w %.3f GB/s %9.2fx\n",
                  f.substr(f.find_last_of('/') + 1).c_str(), filters.c_str(),
                  to_string(info.read_path).c_str(), one, workers, many, many / one);
    } catch (const std::exception& e) {
      std::printf("%-36s error: %s\n", f.c_str(), e.what());
    }
  }
  return 0;
}
