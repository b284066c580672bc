// gpufeed bench — how fast this machine can feed *your* shards to the GPU.
//
//   gpufeed bench DATA [--seconds N] [--workers LIST] [--prefetch LIST] [--order ORDER]
//                 [--dataset NAME] [--labels NAME] [--cache-mib N] [--json] [--no-storage]
//
// DATA is a directory of shards made by gpufeed pack or its manifest.json (one that did not
// finish is refused), another directory of shards, or one HDF5 file or LMDB environment; or an
// HDF5 shard's URL (http://, https://, s3://) or the URL of a pack's manifest.json (its shards
// beside it). For a URL the storage pass is the objects' raw ranged-GET rate (one stream, then
// as many as the most workers swept), and each loader run also reports its requests, the bytes
// fetched against the bytes delivered, request latency p50/p99 and retries (the source's
// transfer counters; the decoded-chunk cache is emptied before each run, so runs compare).
// --order auto (the default) runs the order the loader's own notice recommends for the data:
// block_shuffled where a decode unit holds several records, else shuffled; the table says which
// order ran and why.
// In order, within about --seconds (default 20; a quarter for storage, the rest for the loader
// runs, all of it with --no-storage; the H2D measurement takes well under a second):
//   storage  the shards' files read sequentially by one thread in 16 MiB reads: cold
//            (posix_fadvise DONTNEED first; the report says when the kernel kept the pages) and
//            warm (page cache); raw file bytes, before any decoding (--no-storage skips it)
//   loader   the library's loader over the shards for each (workers, prefetch) of the sweep,
//            the consumer doing no work, on the GPU when there is one (else the host target)
//   h2d      the pinned host-to-device copy rate at the loader's batch size and at 64 MiB (the
//            link's limit), or "no GPU" and why
//   verdict  the fastest configuration's bottleneck (gpufeed/verdict.hpp) and what to change
// Exit status: 0 when measured, 1 when the shards cannot be read (one line on stderr), 2 for
// bad arguments.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <numeric>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_storage.hpp"
#include "commands.hpp"
#include "feed.hpp"
#include "report.hpp"
#ifdef GPUFEED_HAS_REMOTE
#include "remote_probe.hpp"
#endif
#ifdef GPUFEED_CLI_HAS_CUDA
#include "gpufeed/cuda/device.hpp"
#include "gpufeed/cuda/doctor/gpu_checks.hpp"
#endif

namespace gpufeed::cli {
namespace {

namespace doc = gpufeed::detail::doctor;
using json = nlohmann::ordered_json;

struct bench_args {
  std::string data;
  double seconds = 20;
  std::vector<std::size_t> workers, prefetch = {2, 8};
  std::string order = "auto";
  dataset_choice datasets;
  std::string labels;  // --labels NAME (given: datasets.labels)
  std::size_t cache_mib = 0;  // --cache-mib N (given: datasets.cache_bytes)
  bool json = false;
  bool no_storage = false;  // --no-storage: the loader runs only
};

// Workers' share of time spent reading, against reading + waiting for work: how close the
// workers are to their limit (the consumer does no work, so it always waits: its stall says
// nothing here).
double workers_busy(const loader_stats& s) {
  double idle = 0;
  for (const auto& w : s.workers) idle += w.idle_seconds;
  const double read = s.read_seconds();
  return read + idle > 0 ? read / (read + idle) : 0.0;
}

// 1, a quarter, half and all of the hardware threads (distinct, at least 1).
std::vector<std::size_t> default_workers() {
  const std::size_t hw = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::size_t> w = {1, std::max<std::size_t>(1, hw / 4), std::max<std::size_t>(1, hw / 2), hw};
  std::sort(w.begin(), w.end());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  return w;
}

// A loader run's requests, for a source with URL shards (all 0 otherwise).
struct remote_run {
  bool remote = false;
  std::uint64_t requests = 0, fetched = 0, retries = 0, failures = 0;
  double p50_ms = 0, p99_ms = 0;
  // Whole units fetched, of those fetched ahead of their reads, and reads served from a held unit.
  std::uint64_t unit_fetches = 0, unit_prefetches = 0, unit_hits = 0;
};

struct sweep_point {
  std::size_t workers = 0, prefetch = 0;
  feed_result r;
  remote_run net;
};

// The remote side of a bench: the dataset's object bytes and the raw ranged-GET rates.
struct remote_side {
  bool remote = false;
  std::uint64_t dataset_bytes = 0;
#ifdef GPUFEED_HAS_REMOTE
  ranged_rates ranged;
#endif
};

// Runs the loader as s says; for a source with URL shards, from an empty decoded-chunk cache
// and with the run's share of the source's transfer counters.
template <class Source>
sweep_point run_point(const Source& src, const feed_settings& s, bool remote) {
  sweep_point p{s.workers, s.prefetch, {}, {}};
  if constexpr (remote_stats_source<Source>) {
#ifdef GPUFEED_HAS_REMOTE
    if (remote) {
      src.drop_decoded_chunks();
      const remote_stats before = src.remote_stats();
      p.r = run_feed(src, s);
      const remote_stats d = since(src.remote_stats(), before);
      p.net = {true, d.requests, d.bytes_fetched, d.retries, d.failures, latency_quantile_ms(d, 0.5),
               latency_quantile_ms(d, 0.99), d.unit_fetches, d.unit_prefetches, d.unit_hits};
      return p;
    }
#endif
  }
  (void)remote;
  p.r = run_feed(src, s);
  return p;
}

// Bytes fetched per byte delivered, and per epoch against the dataset's bytes (0 when unknown).
double fetched_per_delivered(const sweep_point& p) {
  return p.r.stats.bytes ? static_cast<double>(p.net.fetched) / static_cast<double>(p.r.stats.bytes) : 0;
}
template <class Source>
double fetched_per_dataset(const sweep_point& p, const Source& src, std::uint64_t dataset_bytes) {
  if (!dataset_bytes || !p.r.stats.records) return 0;
  const double epochs = static_cast<double>(p.r.stats.records) / static_cast<double>(src.size());
  return static_cast<double>(p.net.fetched) / epochs / static_cast<double>(dataset_bytes);
}

struct h2d_limit {
  bool gpu = false;
  std::string reason, device;
  double batch_gbps = 0, limit_gbps = 0;
  std::size_t batch_bytes = 0, limit_bytes = std::size_t{64} << 20;
};

h2d_limit measure_h2d_limit(const target& where, const std::string& why, std::size_t batch_bytes) {
  h2d_limit h;
  h.batch_bytes = std::max<std::size_t>(batch_bytes, 4096);
  if (where.is_host()) {
    h.reason = why;
    return h;
  }
#ifdef GPUFEED_CLI_HAS_CUDA
  const int device = where.device();
  h.gpu = true;
  h.device = where.name();
  const auto samples = cuda::measure_h2d(device, {h.batch_bytes, h.limit_bytes}, std::size_t{512} << 20);
  h.batch_gbps = samples[0].pinned_gbps;
  h.limit_gbps = samples[1].pinned_gbps;
#endif
  return h;
}

json verdict_json(const verdict& v) {
  return json{{"bottleneck", to_string(v.stage)}, {"summary", v.summary},
              {"evidence", v.evidence}, {"suggestion", v.suggestion}};
}

void print_storage(const storage_rates& st) {
  std::printf("storage (the files' raw bytes, one thread, 16 MiB sequential reads, no decoding)\n");
  std::printf("  cold   %10s  over %s%s\n", doc::gbps(st.cold_gbps).c_str(), doc::bytes(st.cold_bytes).c_str(),
              st.evicted ? " (page cache evicted first, buffered reads with the kernel's "
                           "read-ahead; gpufeed doctor's O_DIRECT rate has none)"
                         : "");
  if (!st.note.empty()) std::printf("         %s\n", st.note.c_str());
  std::printf("  warm   %10s  over %s (page cache)\n\n", doc::gbps(st.warm_gbps).c_str(),
              doc::bytes(st.warm_bytes).c_str());
}

void print_ranged([[maybe_unused]] const remote_side& net) {
#ifdef GPUFEED_HAS_REMOTE
  const ranged_rates& g = net.ranged;
  std::printf("storage (the objects' raw bytes: ranged GETs of %s through gpufeed's HTTP reader, "
              "no decoding)\n",
              doc::bytes(g.block).c_str());
  std::printf("  latency     p50 %.2f ms, p99 %.2f ms (%zu one-byte GETs, one at a time)\n",
              g.latency_p50_ms, g.latency_p99_ms, g.latency_samples);
  std::printf("  1 stream    %10s  over %s\n", doc::gbps(g.single_gbps).c_str(),
              doc::bytes(g.single_bytes).c_str());
  std::printf("  %zu streams %s%10s  over %s\n\n", g.streams, g.streams < 10 ? " " : "",
              doc::gbps(g.parallel_gbps).c_str(), doc::bytes(g.parallel_bytes).c_str());
#endif
}

template <class Source>
void run_bench(const Source& src, const bench_args& a, const std::vector<std::filesystem::path>& shards,
               bool lmdb) {
  std::string why;
  const target where = device_or_host(0, &why);
  const std::vector<std::size_t> workers = a.workers.empty() ? default_workers() : a.workers;
  remote_side net;
  storage_rates st;
#ifdef GPUFEED_HAS_REMOTE
  net.remote = is_url(a.data);
  if (net.remote) {
    net.dataset_bytes = object_bytes(shards);
    if (!a.no_storage)
      net.ranged = measure_ranged_gets(shards, a.seconds / 4, std::uint64_t{1} << 30,
                                     *std::max_element(workers.begin(), workers.end()));
    st.files = shards.size();
    st.total_bytes = net.dataset_bytes;
  }
#endif
  if (!net.remote && !a.no_storage) st = measure_storage(a.data, a.seconds / 4);
  if (a.no_storage) {
    st.note = "not measured (--no-storage)";
    if (!net.remote) {  // the files' size alone, for the report's first line
      const doc::file_listing list = doc::list_data_files(a.data, 1'000'000);
      st.files = list.files.size();
      st.total_bytes = list.total_bytes;
    }
  }

  const order_choice order = choose_order(src, a.order);
  const double loader_share = a.no_storage ? 1.0 : 0.75;  // the rest: the storage pass
  const double per_run = std::max(
      0.1, a.seconds * loader_share / static_cast<double>(workers.size() * a.prefetch.size()));
  std::vector<sweep_point> sweep;
  for (const std::size_t w : workers)
    for (const std::size_t p : a.prefetch) {
      feed_settings s;
      s.seconds = per_run;
      s.workers = w;
      s.prefetch = p;
      s.epochs = 0;  // as many epochs as the time allows
      s.where = where;
      s.order = order.order;
      s.silence_notice = true;  // said once below, not once per row
      sweep.push_back(run_point(src, s, net.remote));
    }
  const std::size_t best = static_cast<std::size_t>(
      std::max_element(sweep.begin(), sweep.end(), [](const auto& x, const auto& y) { return x.r.gbps < y.r.gbps; }) -
      sweep.begin());
  const feed_result& top = sweep[best].r;
  const std::size_t batch_bytes = top.stats.batches ? top.stats.bytes / top.stats.batches : 0;
  const h2d_limit h2d = measure_h2d_limit(where, why, batch_bytes);
  const std::string format = lmdb ? "lmdb" : "hdf5";

  if (a.json) {
    json j;
    j["data"] = shown_data(a.data);
    j["format"] = format;
    j["shards"] = shards.size();
    j["records"] = src.size();
    j["seconds_limit"] = a.seconds;
    j["order"] = to_string(order.order);
    j["order_reason"] = order.reason;
    j["records_per_decode_unit"] = order.records_per_unit;
    if (!order.notice.empty()) j["order_notice"] = order.notice;
    if (!lmdb) {
      j["dataset"] = a.datasets.dataset;
      j["labels"] = a.datasets.labels ? json(*a.datasets.labels) : json("default");
    }
    j["target"] = where.name();
    if (where.is_host()) j["target_reason"] = why;
    if (a.no_storage)
      j["storage"] = {{"skipped", true}, {"files", st.files}, {"total_bytes", st.total_bytes}};
    else if (!net.remote)
    j["storage"] = {{"files", st.files},           {"total_bytes", st.total_bytes},
                    {"cold_bytes", st.cold_bytes}, {"cold_gbps", st.cold_gbps},
                    {"evicted", st.evicted},       {"cached_fraction_before_cold", st.cached_before},
                    {"warm_bytes", st.warm_bytes}, {"warm_gbps", st.warm_gbps},
                    {"note", st.note}};
#ifdef GPUFEED_HAS_REMOTE
    else
      j["storage"] = {{"remote", true},
                      {"objects", st.files},
                      {"total_bytes", st.total_bytes},
                      {"object_bytes", net.ranged.object_size},
                      {"block_bytes", net.ranged.block},
                      {"latency_p50_ms", net.ranged.latency_p50_ms},
                      {"latency_p99_ms", net.ranged.latency_p99_ms},
                      {"single_bytes", net.ranged.single_bytes},
                      {"single_gbps", net.ranged.single_gbps},
                      {"streams", net.ranged.streams},
                      {"parallel_bytes", net.ranged.parallel_bytes},
                      {"parallel_gbps", net.ranged.parallel_gbps},
                      {"retries", net.ranged.retries}};
#endif
    json runs = json::array();
    for (const auto& p : sweep) {
      runs.push_back({{"workers", p.workers}, {"prefetch", p.prefetch}, {"batch_size", p.r.batch_size},
                      {"seconds", p.r.seconds}, {"batches", p.r.stats.batches},
                      {"gbps", p.r.gbps}, {"records_per_s", p.r.records_per_s},
                      {"stall_fraction", p.r.stats.stall_fraction()},
                      {"workers_busy_fraction", workers_busy(p.r.stats)},
                      {"bottleneck", to_string(p.r.judged.stage)}});
      if (p.net.remote)
        runs.back()["remote"] = {{"requests", p.net.requests},
                                 {"bytes_fetched", p.net.fetched},
                                 {"bytes_delivered", p.r.stats.bytes},
                                 {"fetched_per_delivered", fetched_per_delivered(p)},
                                 {"fetched_per_epoch_per_dataset",
                                  fetched_per_dataset(p, src, net.dataset_bytes)},
                                 {"requests_per_s", static_cast<double>(p.net.requests) / p.r.seconds},
                                 {"latency_p50_ms", p.net.p50_ms},
                                 {"latency_p99_ms", p.net.p99_ms},
                                 {"retries", p.net.retries},
                                 {"failures", p.net.failures},
                                 {"unit_fetches", p.net.unit_fetches},
                                 {"unit_prefetches", p.net.unit_prefetches},
                                 {"unit_hits", p.net.unit_hits}};
    }
    j["loader"] = runs;
    j["best"] = best;
    j["h2d"] = h2d.gpu ? json{{"gpu", true}, {"device", h2d.device},
                              {"batch_bytes", h2d.batch_bytes}, {"pinned_gbps_at_batch", h2d.batch_gbps},
                              {"limit_bytes", h2d.limit_bytes}, {"pinned_gbps", h2d.limit_gbps}}
                       : json{{"gpu", false}, {"reason", "no GPU: " + h2d.reason}};
    j["verdict"] = verdict_json(top.judged);
    const std::string out = j.dump(2) + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return;
  }
  std::printf("gpufeed bench %s: %zu %s shard%s, %llu records, %s; target %s\n\n",
              shown_data(a.data).c_str(),
              shards.size(), lmdb ? "LMDB" : "HDF5", shards.size() == 1 ? "" : "s",
              static_cast<unsigned long long>(src.size()), doc::bytes(st.total_bytes).c_str(),
              where.name().c_str());
  if (a.no_storage)
    std::printf("storage: not measured (--no-storage)\n\n");
  else if (net.remote)
    print_ranged(net);
  else
    print_storage(st);
  std::printf("loader (order %s, batches of %zu records, the consumer doing no work, %.1f s "
              "each)\n",
              to_string(order.order), top.batch_size, per_run);
  std::printf("  order: %s\n", order.reason.c_str());
  if (!lmdb)
    std::printf("  dataset '%s', labels %s\n", a.datasets.dataset.c_str(),
                a.datasets.labels ? ("'" + *a.datasets.labels + "'").c_str()
                                  : "'labels' when present");
  if (!order.notice.empty()) std::printf("  note: %s\n", order.notice.c_str());
  std::printf("  workers  prefetch        rate    records/s  busy  bottleneck\n");
  for (std::size_t k = 0; k < sweep.size(); ++k) {
    const auto& p = sweep[k];
    std::printf("  %7zu  %8zu  %10s  %11.0f  %3.0f %%  %s%s\n", p.workers, p.prefetch,
                doc::gbps(p.r.gbps).c_str(), p.r.records_per_s, 100 * workers_busy(p.r.stats),
                to_string(p.r.judged.stage), k == best ? "  <- fastest" : "");
  }
  std::printf("  busy: the workers' share of time spent reading (100 %% = they are the limit)\n");
  if (net.remote) {
    std::printf("\nremote (each run's requests; dataset %s in %zu objects)\n",
                doc::bytes(net.dataset_bytes).c_str(), shards.size());
    std::printf("  workers  prefetch  requests   req/s   fetched  fetched/delivered  "
                "per epoch/dataset  p50 ms  p99 ms  retries\n");
    for (const auto& p : sweep)
      std::printf("  %7zu  %8zu  %8llu  %6.0f  %8s  %17.3f  %17.3f  %6.2f  %6.2f  %7llu\n",
                  p.workers, p.prefetch, static_cast<unsigned long long>(p.net.requests),
                  static_cast<double>(p.net.requests) / p.r.seconds, doc::bytes(p.net.fetched).c_str(),
                  fetched_per_delivered(p), fetched_per_dataset(p, src, net.dataset_bytes),
                  p.net.p50_ms, p.net.p99_ms, static_cast<unsigned long long>(p.net.retries));
    std::printf("  latency from a power-of-two histogram (within a factor of two); failures: %llu\n",
                static_cast<unsigned long long>(std::accumulate(
                    sweep.begin(), sweep.end(), std::uint64_t{0},
                    [](std::uint64_t n, const sweep_point& p) { return n + p.net.failures; })));
  }
  if (h2d.gpu)
    std::printf("\npinned host-to-device on %s: %s at %s (the fastest run's batch), %s at %s\n",
                h2d.device.c_str(), doc::gbps(h2d.batch_gbps).c_str(), doc::bytes(h2d.batch_bytes).c_str(),
                doc::gbps(h2d.limit_gbps).c_str(), doc::bytes(h2d.limit_bytes).c_str());
  else
    std::printf("\npinned host-to-device: no GPU (%s)\n", h2d.reason.c_str());
  std::printf("\nverdict for the fastest run (%zu workers, prefetch %zu): %s", sweep[best].workers,
              sweep[best].prefetch, top.judged.report().c_str());
}

}  // namespace

void add_bench(CLI::App& app) {
  auto a = std::make_shared<bench_args>();
  auto* cmd = app.add_subcommand(
      "bench",
      "Measure how fast this machine feeds your shards to the GPU: storage read rate (cold and "
      "warm), the loader over a sweep of workers and prefetch, the pinned host-to-device limit, "
      "and the bottleneck verdict. Exit status 0, 1 when the shards cannot be read.");
  cmd->add_option("DATA", a->data,
                  "a directory of shards made by gpufeed pack, or one shard; or a shard's URL "
                  "(http://, https://, s3://) or a pack manifest.json's URL")
      ->required();
  cmd->add_option("--seconds", a->seconds, "about how long the whole measurement may take")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--workers", a->workers,
                  "worker counts to sweep (default: 1 and a quarter, half and all of the hardware threads)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}))
      ->delimiter(',');
  cmd->add_option("--prefetch", a->prefetch, "prefetch depths to sweep")
      ->check(CLI::Range(std::size_t{1}, std::size_t{256}))
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--order", a->order,
                  "sample order of the loader runs: auto (block_shuffled where a compressed "
                  "chunk holds several records, else shuffled), shuffled, block_shuffled, "
                  "sequential")
      ->check(CLI::IsMember({"auto", "shuffled", "block_shuffled", "sequential"}))
      ->capture_default_str();
  cmd->add_option("--dataset", a->datasets.dataset, "HDF5: the dataset holding the records")
      ->capture_default_str();
  auto* labels = cmd->add_option("--labels", a->labels,
                  "HDF5: the label dataset ('' for none; default: 'labels' when present)");
  auto* cache = cmd->add_option("--cache-mib", a->cache_mib,
                                "HDF5: the decoded-chunk cache budget in MiB (default: automatic); "
                                "below the data's decoded size, every epoch reads and decodes "
                                "again, as over data larger than memory")
                    ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 30));
  cmd->add_flag("--json", a->json, "print the figures as JSON instead of a table");
  cmd->add_flag("--no-storage", a->no_storage,
                "skip the storage pass (for a URL: its ranged-GET requests), run the loader only");
  cmd->callback([a, labels, cache] {
    if (labels->count()) a->datasets.labels = a->labels;
    if (cache->count()) a->datasets.cache_bytes = a->cache_mib << 20;
    try {
      bool lmdb = false;
      const auto shards = find_data_shards(a->data, lmdb);
      if (shards.empty())
        throw format_error("no HDF5 or LMDB shards here; pack the files first (gpufeed pack " + a->data +
                               " -o SHARDS)",
                           file_context(a->data));
      with_source(
          shards, lmdb, [&](const auto& src) { run_bench(src, *a, shards, lmdb); }, a->datasets);
    } catch (...) {
      fail_current("bench");
    }
  });
}

}  // namespace gpufeed::cli
