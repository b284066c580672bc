// gpufeed bench — how fast this machine can feed *your* shards to the GPU.
//
//   gpufeed bench DATA [--seconds N] [--workers LIST] [--prefetch LIST] [--order ORDER]
//                 [--dataset NAME] [--labels NAME] [--json]
//
// DATA is a directory of shards made by gpufeed pack or its manifest.json (one that did not
// finish is refused), another directory of shards, or one HDF5 file or LMDB environment.
// --order auto (the default) runs the order the loader's own notice recommends for the data:
// block_shuffled where a decode unit holds several records, else shuffled; the table says which
// order ran and why.
// In order, within about --seconds (default 20; a quarter for storage, the rest for the loader
// runs, the H2D measurement takes well under a second):
//   storage  the shards' files read sequentially by one thread in 16 MiB reads: cold
//            (posix_fadvise DONTNEED first; the report says when the kernel kept the pages) and
//            warm (page cache); raw file bytes, before any decoding
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
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_storage.hpp"
#include "commands.hpp"
#include "feed.hpp"
#include "report.hpp"
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
  bool json = false;
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

struct sweep_point {
  std::size_t workers = 0, prefetch = 0;
  feed_result r;
};

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

template <class Source>
void run_bench(const Source& src, const bench_args& a, const std::vector<std::filesystem::path>& shards,
               bool lmdb) {
  std::string why;
  const target where = device_or_host(0, &why);
  const storage_rates st = measure_storage(a.data, a.seconds / 4);

  const order_choice order = choose_order(src, a.order);
  const std::vector<std::size_t> workers = a.workers.empty() ? default_workers() : a.workers;
  const double per_run = std::max(0.1, a.seconds * 0.75 / static_cast<double>(workers.size() * a.prefetch.size()));
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
      sweep.push_back({w, p, run_feed(src, s)});
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
    j["data"] = a.data;
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
    j["storage"] = {{"files", st.files},           {"total_bytes", st.total_bytes},
                    {"cold_bytes", st.cold_bytes}, {"cold_gbps", st.cold_gbps},
                    {"evicted", st.evicted},       {"cached_fraction_before_cold", st.cached_before},
                    {"warm_bytes", st.warm_bytes}, {"warm_gbps", st.warm_gbps},
                    {"note", st.note}};
    json runs = json::array();
    for (const auto& p : sweep)
      runs.push_back({{"workers", p.workers}, {"prefetch", p.prefetch}, {"batch_size", p.r.batch_size},
                      {"seconds", p.r.seconds}, {"batches", p.r.stats.batches},
                      {"gbps", p.r.gbps}, {"records_per_s", p.r.records_per_s},
                      {"stall_fraction", p.r.stats.stall_fraction()},
                      {"workers_busy_fraction", workers_busy(p.r.stats)},
                      {"bottleneck", to_string(p.r.judged.stage)}});
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
  std::printf("gpufeed bench %s: %zu %s shard%s, %llu records, %s; target %s\n\n", a.data.c_str(),
              shards.size(), lmdb ? "LMDB" : "HDF5", shards.size() == 1 ? "" : "s",
              static_cast<unsigned long long>(src.size()), doc::bytes(st.total_bytes).c_str(),
              where.name().c_str());
  std::printf("storage (the files' raw bytes, one thread, 16 MiB sequential reads, no decoding)\n");
  std::printf("  cold   %10s  over %s%s\n", doc::gbps(st.cold_gbps).c_str(), doc::bytes(st.cold_bytes).c_str(),
              st.evicted ? " (page cache evicted first, buffered reads with the kernel's "
                           "read-ahead; gpufeed doctor's O_DIRECT rate has none)"
                         : "");
  if (!st.note.empty()) std::printf("         %s\n", st.note.c_str());
  std::printf("  warm   %10s  over %s (page cache)\n\n", doc::gbps(st.warm_gbps).c_str(),
              doc::bytes(st.warm_bytes).c_str());
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
  cmd->add_option("DATA", a->data, "a directory of shards made by gpufeed pack, or one shard")->required();
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
  cmd->add_flag("--json", a->json, "print the figures as JSON instead of a table");
  cmd->callback([a, labels] {
    if (labels->count()) a->datasets.labels = a->labels;
    try {
      bool lmdb = false;
      const auto shards = find_shards(a->data, lmdb);
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
