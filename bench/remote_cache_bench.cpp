// remote_cache_bench: a host loader's epochs over HDF5 shards read three ways in one run, the same
// shards each time: from local files, over HTTP (ranged GETs, no cache), and over HTTP through
// the node-local cache (hdf5_options::remote_cache): its first epoch fills the cache, its second
// reads the cache. bench/remote_cache.sh serves the shards with nginx on the loopback interface.
//
//   remote_cache_bench --local DIR --url BASE --cache DIR [--shards N] [--records N]
//                      [--workers N] [--order block_shuffled|sequential|shuffled] [--repeat N]
//
// --repeat N then runs N more pairs of epochs, one from local files and one from the cache,
// alternately, and prints each pair's rates and the median of their ratios: on a machine whose
// load moves, epochs run next to each other compare better than epochs seconds apart.
//
// The shards DIR/shard-K.h5 (contiguous, 16 KiB records) are made unless there; BASE + "shard-K.h5"
// is each one's URL. One line per epoch: what, records/s, MB/s, seconds; then the cache's counters.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gpufeed/detail/remote/local_cache_source.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "hdf5_read_files.hpp"

namespace {

struct epoch_rate {
  double seconds = 0;
  std::uint64_t records = 0, bytes = 0;
};

epoch_rate run_epoch(const gpufeed::hdf5_source& s, std::size_t workers, gpufeed::sample_order order) {
  gpufeed::loader_config c;
  c.epochs = 1;
  c.batch_size = 64;
  c.workers = workers;
  c.order = order;
  epoch_rate r;
  const auto t0 = std::chrono::steady_clock::now();
  gpufeed::loader<gpufeed::hdf5_source> l(s, c);
  while (auto b = l.next()) {
    r.records += b->size();
    for (std::size_t k = 0; k < b->size(); ++k) r.bytes += b->record(k).size();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void print(const char* what, const epoch_rate& r) {
  std::printf("%-28s %10.0f records/s %9.1f MB/s %8.2f s\n", what,
              static_cast<double>(r.records) / r.seconds,
              static_cast<double>(r.bytes) / r.seconds / 1e6, r.seconds);
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path local, cache;
  std::string base;
  std::size_t shards = 4, records = 4096, workers = 4, repeat = 0;
  gpufeed::sample_order order = gpufeed::sample_order::block_shuffled;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--local") local = v;
    else if (a == "--url") base = v;
    else if (a == "--cache") cache = v;
    else if (a == "--shards") shards = std::stoul(v);
    else if (a == "--records") records = std::stoul(v);
    else if (a == "--workers") workers = std::stoul(v);
    else if (a == "--repeat") repeat = std::stoul(v);
    else if (a == "--order")
      order = v == "sequential" ? gpufeed::sample_order::sequential
              : v == "shuffled" ? gpufeed::sample_order::shuffled
                                : gpufeed::sample_order::block_shuffled;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (local.empty() || base.empty() || cache.empty()) {
    std::fprintf(stderr, "usage: remote_cache_bench --local DIR --url BASE --cache DIR ...\n");
    return 2;
  }
  try {
    std::vector<std::filesystem::path> paths;
    std::vector<std::string> urls;
    std::filesystem::create_directories(local);
    for (std::size_t k = 0; k < shards; ++k) {
      const std::string name = "shard-" + std::to_string(k) + ".h5";
      paths.push_back(local / name);
      urls.push_back(base + name);
      h5files::ensure_file(paths.back(), records, 0);
      h5files::warm_page_cache(paths.back());
    }
    std::printf("%zu shards x %zu records of %zu bytes, %zu workers, order %s\n", shards, records,
                h5files::record_bytes, workers, to_string(order));
    const gpufeed::hdf5_source from_files(paths);
    print("local files", run_epoch(from_files, workers, order));
    print("local files, epoch 2", run_epoch(from_files, workers, order));
    {
      const gpufeed::hdf5_source uncached(urls);
      print("http, no cache", run_epoch(uncached, workers, order));
    }
    gpufeed::hdf5_options o;
    o.remote_cache.directory = cache;
    o.remote_cache.max_bytes = 2 * shards * records * h5files::record_bytes + (std::uint64_t{64} << 20);
    const gpufeed::hdf5_source cached(urls, o);
    print("http + cache, epoch 1", run_epoch(cached, workers, order));
    print("http + cache, epoch 2", run_epoch(cached, workers, order));
    std::vector<double> ratios;
    for (std::size_t r = 0; r < repeat; ++r) {
      const epoch_rate l = run_epoch(from_files, workers, order);
      const epoch_rate c = run_epoch(cached, workers, order);
      const double lr = static_cast<double>(l.records) / l.seconds;
      const double cr = static_cast<double>(c.records) / c.seconds;
      ratios.push_back(cr / lr);
      std::printf("pair %-3zu local %10.0f records/s, cache %10.0f records/s: %.2fx\n", r + 1, lr,
                  cr, cr / lr);
    }
    if (!ratios.empty()) {
      std::sort(ratios.begin(), ratios.end());
      const std::size_t m = ratios.size();
      std::printf("cache epoch / local epoch, median of %zu pairs: %.2fx (min %.2fx, max %.2fx)\n", m,
                  m % 2 ? ratios[m / 2] : (ratios[m / 2 - 1] + ratios[m / 2]) / 2, ratios.front(),
                  ratios.back());
    }
    const auto& rc = o.remote_cache;
    const auto st = gpufeed::detail::remote::shared_local_cache(
                        *gpufeed::detail::remote::resolve_cache_config(rc.directory, rc.max_bytes,
                                                                       rc.block_bytes))
                        ->stats();
    std::printf("cache: %llu hits, %llu misses, %llu bytes local, %llu bytes fetched, %llu corrupt\n",
                static_cast<unsigned long long>(st.hits), static_cast<unsigned long long>(st.misses),
                static_cast<unsigned long long>(st.bytes_local),
                static_cast<unsigned long long>(st.bytes_fetched),
                static_cast<unsigned long long>(st.corrupt));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "remote_cache_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
