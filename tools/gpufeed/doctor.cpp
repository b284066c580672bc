// gpufeed doctor — can this machine keep a GPU fed, and if not, what stands in the way?
//
//   gpufeed doctor [--data PATH] [--order ORDER] [--dataset NAME] [--labels NAME] [--json]
//                  [--max-gib N] [--require-gpu]
//
// Checks, in report order: NVIDIA device files (with container hints); the GPU checks (visible,
// driver/runtime versions, name/memory/compute capability, NVML, PCIe link, throttle reasons,
// pinned vs pageable copy rates); the storage read rate of PATH; the end-to-end loader run.
// PATH may be a URL (http://, https://, s3://: an HDF5 shard, or a pack's manifest.json with its
// shards beside it): the storage check then opens the objects (reachability, range support),
// times one-byte GETs (latency) and reads with ranged GETs, one stream and several at once; a
// 403, 404 or TLS failure fails it with the URL redacted and what to check.
// Without a GPU, or in a build without CUDA, it still runs and says what it could not check.
//
// Exit status: 0 when no check failed (warnings and skips included), 1 when at least one did
// (the report is printed first, then one line on stderr names the failed checks); 2 for bad
// arguments.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "commands.hpp"
#ifdef GPUFEED_HAS_REMOTE
#include "remote_probe.hpp"
#endif
#include "gpufeed/doctor/doctor.hpp"
#include "feed.hpp"
#ifdef GPUFEED_CLI_HAS_CUDA
#include "gpufeed/cuda/doctor/gpu_checks.hpp"
#endif

namespace gpufeed::cli {
namespace {

std::string doc_gbps(double v) { return detail::doctor::gbps(v); }

struct doctor_args {
  std::string data;
  bool json = false;
  double max_gib = 1.0;
  bool require_gpu = false;
  double loader_seconds = 3.0;
  std::string order = "auto";
  dataset_choice datasets;
  std::string labels;  // --labels NAME (given: datasets.labels)
};

// The end-to-end check: the loader itself over the shards at --data, for a few seconds, with
// the GPU as target where there is one, and its bottleneck verdict. The consumer does no work,
// so the verdict names the loading stage that limits this machine (storage, decode, h2d).
// ---------------------------------------------------------------------------------------------
template <class Source>
void run_loader(doctor_check& c, const Source& src, const doctor_args& args) {
  std::string why = "this gpufeed was built without CUDA";
  feed_settings s;
  s.seconds = args.loader_seconds;
  s.prefetch = 8;
  s.where = device_or_host(0, &why);
  const order_choice order = choose_order(src, args.order);
  s.order = order.order;
  s.silence_notice = true;  // its notice is the "note" fact below
  const feed_result r = run_feed(src, s);
  const loader_stats& st = r.stats;
  char line[320];
  std::snprintf(line, sizeof line,
                "the loader delivered %.2f GB/s (%.0f records/s) to %s in %s order, the "
                "consumer doing no work; bottleneck: %s",
                r.gbps, r.records_per_s, s.where.name().c_str(), to_string(order.order),
                to_string(r.judged.stage));
  c.summary = line;
  // PASS says the loader ran as well as this data and machine allow; a run that decoded the
  // same chunks many times (an order that does not suit the data) is a warning with its fix.
  // The same for shuffled order over chunks of many records, even where this run's data fitted
  // the decoded-chunk cache (larger data will not).
  const double amp = st.decode ? st.decode->amplification() : 1.0;
  if (amp >= 2.0 || !order.notice.empty()) {
    c.status = check_status::warn;
    char why_slow[200];
    if (amp >= 2.0)
      std::snprintf(why_slow, sizeof why_slow,
                    "; each record decoded %.0fx its bytes: the order does not suit the data", amp);
    else
      std::snprintf(why_slow, sizeof why_slow,
                    "; a compressed chunk holds %.0f records, which this order decodes once per "
                    "record on data larger than the cache: the order does not suit the data",
                    order.records_per_unit);
    c.summary += why_slow;
    c.hint = "--order auto (block_shuffled here); in code, sample_order::block_shuffled";
  } else {
    c.status = check_status::pass;
  }
  c.fact("order", std::string(to_string(order.order)) + " (" + order.reason + ")");
  if (!order.notice.empty()) c.fact("note", order.notice);
  c.fact("target", s.where.is_host() ? "host (" + why + ")" : s.where.name());
  c.fact("batch", std::to_string(r.batch_size) + " records");
  c.fact("workers", std::to_string(st.worker_count));
  c.fact("verdict", r.judged.summary);
  for (std::size_t k = 0; k < r.judged.evidence.size(); ++k)
    c.fact("evidence " + std::to_string(k + 1), r.judged.evidence[k]);
  c.number("gb_per_s", r.gbps);
  c.number("records_per_s", r.records_per_s);
  c.number("stall_fraction", st.stall_fraction());
  c.number("pinned_bytes", static_cast<double>(st.pinned_bytes));
  if (c.hint.empty()) c.hint = r.judged.suggestion;
}

// The storage check for --data URL: see the top of this file. Fails (with the hint its errno
// suggests) when an object cannot be opened or read; the summary names the URL redacted.
void add_remote_storage_check(doctor_report& report, const doctor_args& args) {
  doctor_check c("storage", "Storage read rate");
  const std::string shown = shown_data(args.data);
#ifdef GPUFEED_HAS_REMOTE
  try {
    const auto urls = url_shards(args.data);
    const std::uint64_t max_bytes = static_cast<std::uint64_t>(args.max_gib * 1073741824.0);
    const ranged_rates g = measure_ranged_gets(urls, 3.0, max_bytes, 8);
    c.status = check_status::pass;
    char line[400];
    std::snprintf(line, sizeof line,
                  "%s answers ranged GETs: latency p50 %.2f ms, p99 %.2f ms; %s with one stream, "
                  "%s with %zu at once (%s GETs, no decoding)",
                  shown.c_str(), g.latency_p50_ms, g.latency_p99_ms,
                  doc_gbps(g.single_gbps).c_str(), doc_gbps(g.parallel_gbps).c_str(), g.streams,
                  detail::doctor::bytes(g.block).c_str());
    c.summary = line;
    c.fact("url", shown);
    c.fact("objects", std::to_string(urls.size()) + " (" + std::to_string(g.objects) + " read)");
    c.fact("ranges", "honoured (206 with Content-Range)");
    c.fact("first object", detail::doctor::bytes(g.object_size));
    c.fact("single stream", doc_gbps(g.single_gbps) + " over " + detail::doctor::bytes(g.single_bytes));
    c.fact("parallel", doc_gbps(g.parallel_gbps) + " over " + detail::doctor::bytes(g.parallel_bytes) +
                           ", " + std::to_string(g.streams) + " streams");
    if (g.retries) c.fact("retries", std::to_string(g.retries));
    c.number("latency_p50_ms", g.latency_p50_ms);
    c.number("latency_p99_ms", g.latency_p99_ms);
    c.number("single_gb_per_s", g.single_gbps);
    c.number("parallel_gb_per_s", g.parallel_gbps);
    c.number("streams", static_cast<double>(g.streams));
    c.number("retries", static_cast<double>(g.retries));
    if (g.parallel_gbps < 1.5 * g.single_gbps && g.streams > 1)
      c.hint = "parallel requests add little here: the link or the server is the limit, not "
               "one request's latency";
  } catch (const gpufeed::error& e) {
    c.status = check_status::fail;
    c.summary = "cannot read " + shown + ": " + e.describe();
    const long long err = e.context().status.value_or(0);
    const std::string text = e.describe();
    if (err == ENOENT)
      c.hint = "the server says the object does not exist (404): check the URL's path (the "
               "bucket and key for s3://)";
    else if (err == EACCES)
      c.hint = "the server refused access (403): check the credentials (AWS_ACCESS_KEY_ID and "
               "AWS_SECRET_ACCESS_KEY, AWS_PROFILE), the region, the bucket's policy, or a "
               "presigned URL's expiry";
    else if (text.find("SSL") != std::string::npos || text.find("certificate") != std::string::npos ||
             text.find("TLS") != std::string::npos)
      c.hint = "the TLS handshake failed: the server's certificate is not trusted here (its CA "
               "missing from the system's store) or does not name the host";
    else if (err == EOPNOTSUPP)
      c.hint = "the server ignores Range: gpufeed reads objects with ranged GETs only";
    else
      c.hint = "check that the server is up and reachable from this machine (proxy, firewall)";
  }
#else
  c.status = check_status::fail;
  c.summary = shown + " is a URL: this gpufeed was built without the remote component";
  c.hint = "rebuild gpufeed with libcurl and OpenSSL (the remote component)";
#endif
  report.add(std::move(c));
}

void add_loader_check(doctor_report& report, const doctor_args& args) {
  doctor_check c("loader", "End-to-end loader run");
  if (args.data.empty()) {
    c.summary = "no --data given: the loader was not run";
    c.hint = "pass --data with a directory of shards made by gpufeed pack";
    report.add(std::move(c));
    return;
  }
  // A path that is not there is the storage check's failure: one cause, one failed check.
  std::error_code ec;
  const bool url = detail::remote::is_remote_url(args.data);
  const auto storage = std::find_if(report.checks.begin(), report.checks.end(),
                                    [](const doctor_check& k) { return k.id == "storage"; });
  if (url && storage != report.checks.end() && storage->status == check_status::fail) {
    c.summary = shown_data(args.data) + " cannot be read (see the storage check): the loader was not run";
    report.add(std::move(c));
    return;
  }
  if (!url && !std::filesystem::exists(args.data, ec)) {
    c.summary = "'" + args.data + "' does not exist (see the storage check): the loader was not run";
    report.add(std::move(c));
    return;
  }
  try {
    bool lmdb = false;
    const auto shards = find_data_shards(args.data, lmdb);
    const bool ran = with_source(
        shards, lmdb, [&](const auto& src) { run_loader(c, src, args); }, args.datasets);
    if (!ran) {
      c.summary = args.data + " holds no HDF5 or LMDB shards: the loader was not run";
      c.hint = "pack the files first: gpufeed pack " + args.data + " -o SHARDS, then --data SHARDS";
    }
  } catch (const gpufeed::error& e) {
    c.status = check_status::fail;
    c.summary = "the loader failed: " + e.describe();  // no gpufeed source location for users
  } catch (const std::exception& e) {
    c.status = check_status::fail;
    c.summary = std::string("the loader failed: ") + e.what();
  }
  report.add(std::move(c));
}

void add_gpu_part(doctor_report& report, const doctor_args& args) {
#ifdef GPUFEED_CLI_HAS_CUDA
  cuda::gpu_check_options opts;
  opts.require_gpu = args.require_gpu;
  cuda::add_gpu_checks(report, opts);
#else
  add_skipped_gpu_checks(report, "this gpufeed was built without CUDA");
  if (args.require_gpu) {
    auto& visible = report.checks[report.checks.size() - std::size(gpu_check_names)];
    visible.status = check_status::fail;
    visible.summary = "this gpufeed was built without CUDA, and --require-gpu was given";
    visible.hint = "rebuild gpufeed with the CUDA Toolkit (GPUFEED_ENABLE_CUDA=ON)";
  }
#endif
}

// The NUMA table, for the GPUs CUDA shows this process (CUDA_VISIBLE_DEVICES applies), else
// every NVIDIA GPU in sysfs.
void add_numa_part(doctor_report& report) {
  numa_check_options o;
#ifdef GPUFEED_CLI_HAS_CUDA
  const cuda::device_query q = cuda::query();
  for (int d = 0; q.available && d < q.device_count; ++d) {
    const std::string bus = cuda::properties(d).pci_bus_id;
    if (!bus.empty()) o.gpus.push_back({"cuda:" + std::to_string(d) + " (" + bus + ")", bus});
  }
#endif
  add_numa_check(report, o);
}

void run_doctor(const doctor_args& args) {
  doctor_report report;
  add_device_files_check(report);
  add_gpu_part(report, args);
  storage_check_options storage;
  storage.max_bytes = static_cast<std::uint64_t>(args.max_gib * 1073741824.0);
  if (detail::remote::is_remote_url(args.data))
    add_remote_storage_check(report, args);
  else
    add_storage_check(report, args.data, storage);
  add_numa_part(report);  // after storage: scripts read the checks before it by position
  add_loader_check(report, args);

  const std::string out = args.json ? report.to_json_string() : report.to_text();
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  if (report.exit_code() != 0) {
    std::string failed;
    for (const auto& c : report.checks)
      if (c.status == check_status::fail) failed += (failed.empty() ? "" : ", ") + c.id;
    std::fprintf(stderr, "gpufeed doctor: failed checks: %s\n", failed.c_str());
    throw CLI::RuntimeError(1);
  }
}

}  // namespace

void add_doctor(CLI::App& app) {
  auto args = std::make_shared<doctor_args>();
  auto* cmd = app.add_subcommand(
      "doctor",
      "Check this machine: NVIDIA device files, GPU, driver and runtime versions, PCIe link, "
      "clock throttling, pinned vs pageable copy rates, the storage read rate of --data and a "
      "loader run over it, and the GPU <-> NUMA node <-> cores table. "
      "Exit status 0 unless a check failed (then 1).");
  cmd->add_option("--data", args->data,
                  "directory (read recursively) or file holding your shards: measure its storage "
                  "and page-cache read rates and run the loader over its shards (for a sweep of "
                  "workers and prefetch: gpufeed bench DATA)");
  cmd->add_flag("--json", args->json, "print the report as JSON (every check with id, status, "
                                      "summary, facts, numbers, hint)");
  cmd->add_option("--max-gib", args->max_gib,
                  "read at most this many GiB of --data per pass (keeps the storage test to seconds)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--loader-seconds", args->loader_seconds,
                  "how long the end-to-end loader run may take (one epoch at most)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--order", args->order,
                  "sample order of the loader run: auto (block_shuffled where a compressed chunk "
                  "holds several records, else shuffled), shuffled, block_shuffled, sequential")
      ->check(CLI::IsMember({"auto", "shuffled", "block_shuffled", "sequential"}))
      ->capture_default_str();
  cmd->add_option("--dataset", args->datasets.dataset,
                  "HDF5: the dataset of --data holding the records")
      ->capture_default_str();
  auto* labels = cmd->add_option("--labels", args->labels,
                  "HDF5: the label dataset ('' for none; default: 'labels' when present)");
  cmd->add_flag("--require-gpu", args->require_gpu,
                "treat 'no usable GPU' as a failure even on a machine without an NVIDIA driver");
  cmd->callback([args, labels] {
    if (labels->count()) args->datasets.labels = args->labels;
    run_doctor(*args);
  });
}

}  // namespace gpufeed::cli
