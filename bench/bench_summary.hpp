// gpufeed-bench: the machine description and the summary — gpufeed's best (the median of its
// repeated runs) against each naive loader, the measured limits and (given --peer) PyTorch's best
// configuration, and the targets checked.
#pragma once

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_result.hpp"

namespace bench {

inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// The 1-minute load average: figures taken while other work runs are not the machine's.
inline double load_average() {
  double l[1] = {0};
  return ::getloadavg(l, 1) == 1 ? l[0] : 0.0;
}

inline std::string machine_description() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  utsname u{};
  ::uname(&u);
  const double mem = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                     static_cast<double>(::sysconf(_SC_PAGESIZE)) / double(1ull << 30);
  return std::string(host) + ": " + cpu_model() + ", " +
         std::to_string(std::thread::hardware_concurrency()) + " hardware threads, " +
         fmt("%.0f GiB", mem) + ", Linux " + u.release + fmt(", load average %.2f", load_average());
}

inline std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
  return buf;
}

// The case with the highest GB/s among those `keep` accepts.
template <class Pred>
const result* best_of(const std::vector<result>& rs, Pred keep) {
  const result* b = nullptr;
  for (const auto& r : rs)
    if (keep(r) && (!b || r.gb_per_s() > b->gb_per_s())) b = &r;
  return b;
}

struct summary {
  std::vector<std::string> lines;
  std::vector<result> checks;  // the targets, as JSON objects (loader "target")
  std::vector<result> rows;    // the summary table, as JSON objects (loader "summary")

  void check(const std::string& name, const std::string& what, bool applicable, bool pass,
             double measured, double goal, const std::string& detail) {
    result r;
    r.case_name = "target/" + name;
    r.loader = "target";
    r.extra["goal"] = goal;
    r.extra["measured"] = measured;
    r.extra["pass"] = applicable ? nlohmann::ordered_json(pass) : nlohmann::ordered_json(nullptr);
    r.note = what;
    checks.push_back(r);
    lines.push_back(std::string(applicable ? (pass ? "PASS " : "FAIL ") : "n/a  ") + what + ": " +
                    detail);
  }
};

// Builds the summary from every result of the run. peers: PyTorch's JSON objects (may be empty).
inline summary summarise(const std::vector<result>& rs, const std::vector<nlohmann::json>& peers,
                         bool device) {
  summary s;
  auto gb = [](const result* r) { return r ? r->gb_per_s() : 0.0; };
  std::map<std::size_t, bool> sizes;
  for (const auto& r : rs)
    if (r.loader == "gpufeed" && r.case_name.rfind("gpufeed/", 0) == 0) sizes[r.record_bytes] = true;
  char buf[768];
  // gpufeed's figure per (record size, format, order): the repeated run of the best sweep
  // configuration (its median) when there is one, else the best single run.
  auto gpufeed_case = [&](std::size_t rec, const std::string& f, const std::string& order) {
    auto keep = [&](const result& r) {
      return r.loader == "gpufeed" && r.case_name.rfind("gpufeed/", 0) == 0 &&
             r.record_bytes == rec && r.format == f && r.order == order;
    };
    const result* h = best_of(rs, [&](const result& r) { return keep(r) && r.extra.value("headline", false); });
    return h ? h : best_of(rs, keep);
  };
  // The naive variants (bench_naive.hpp), load only; per_batch with threads > 1: the best count.
  auto naive_case = [&](std::size_t rec, const char* variant, bool many) {
    const result* b = nullptr;
    for (const auto& r : rs)
      if (r.loader == "naive" && r.record_bytes == rec && r.extra.value("compute_ms", 0.0) == 0 &&
          r.extra.value("variant", std::string()) == variant && (r.workers > 1) == many &&
          (!b || quoted_gb_per_s(r) > quoted_gb_per_s(*b)))
        b = &r;
    return b;
  };
  auto q = [](const result* r) { return r ? quoted_gb_per_s(*r) : 0.0; };
  auto times = [&](double g, const result* n) { return q(n) > 0 ? g / q(n) : 0.0; };
  s.lines.push_back("record  dataset        order          M rec/s gpufeed GB/s (range)          best config   "
                    "x naive/rec  x naive/batch  x naive/batch-tN  limit GB/s (same threads) x limit");
  for (const auto& [rec, _] : sizes) {
    const result* nrec = naive_case(rec, "per_record", false);
    const result* nbat = naive_case(rec, "per_batch", false);
    const result* nthr = naive_case(rec, "per_batch", true);
    for (const char* f : {"hdf5", "hdf5-pread", "hdf5-map", "hdf5-deflate", "lmdb"})
      for (const char* order : {"shuffled", "sequential", "block_shuffled"}) {
        const result* g = gpufeed_case(rec, f, order);
        if (!g) continue;
        // The limit of the same read: lmdb's mdb_get, a memory map's memcpy, or pread.
        const std::string fs = f;
        const std::string kind = fs == "lmdb" ? "limit:lmdb_raw"
                                 : fs == "hdf5-pread" || fs == "hdf5-deflate" ? "limit:pread"
                                                                                : "limit:mmap";
        const result* lim = best_of(rs, [&](const result& r) {
          return r.loader == kind && r.record_bytes == rec && r.workers == g->workers;
        });
        const bool has_limit = lim && std::string(f) != "hdf5-deflate";
        std::string config = "w" + std::to_string(g->workers) + "/p" + std::to_string(g->prefetch);
        if (device) config += "/s" + std::to_string(g->streams);
        if (g->extra.value("chunk_records", 0) > 0) config += "/aligned";
        const double gg = quoted_gb_per_s(*g);
        const std::string range = quoted_range(*g);
        std::snprintf(buf, sizeof buf,
                      "%-7s %-14s %-14s %7.2f %8.3f %-22s %-13s %10.1fx %13.1fx %16.1fx  %10.3f %-14s %7.2f",
                      size_name(rec).c_str(), f, order, gg * 1e3 / static_cast<double>(rec), gg,
                      range.c_str(), config.c_str(),
                      times(gg, nrec), times(gg, nbat), times(gg, nthr), has_limit ? gb(lim) : 0.0,
                      has_limit ? lim->loader.substr(6).c_str() : "-",
                      has_limit && gb(lim) > 0 ? gg / gb(lim) : 0.0);
        s.lines.push_back(buf);
        result row;  // the same line as a JSON object (loader "summary")
        row.case_name = "summary/" + std::string(f) + "/" + size_name(rec) + "/" + order;
        row.loader = "summary";
        row.record_bytes = rec;
        row.format = f;
        row.order = order;
        row.extra["gpufeed_case"] = g->case_name;
        row.extra["gpufeed_gb_per_s"] = gg;
        row.extra["gpufeed_records_per_s"] = gg * 1e9 / static_cast<double>(rec);
        row.extra["gpufeed_runs"] = g->extra.value("repeats", 1);
        row.extra["gpufeed_min_gb_per_s"] = g->extra.value("min_gb_per_s", gg);
        row.extra["gpufeed_max_gb_per_s"] = g->extra.value("max_gb_per_s", gg);
        for (auto [key, n] : {std::pair{"naive_per_record", nrec}, std::pair{"naive_per_batch", nbat},
                              std::pair{"naive_per_batch_threads", nthr}}) {
          row.extra[std::string(key) + "_case"] = n ? n->case_name : "";
          row.extra[std::string(key) + "_gb_per_s"] = q(n);
          row.extra["x_" + std::string(key)] = times(gg, n);
        }
        row.extra["limit_gb_per_s"] = has_limit ? gb(lim) : 0.0;
        s.rows.push_back(row);
      }
    for (const result* n : {nrec, nbat, nthr})
      if (n)
        s.lines.push_back("        " + n->case_name + ": " + fmt("%.3f GB/s", q(n)) + " (" +
                          quoted_range(*n) + ", " + std::to_string(n->workers) + " thread(s))");
  }

  // PyTorch's best configuration (the peer script's object with "best": true, else the fastest
  // shuffled 16 KiB case), beside gpufeed's HDF5 16 KiB shuffled figure.
  const nlohmann::json* torch_best = nullptr;
  for (const auto& pj : peers)
    if (pj.value("record_bytes", 0) == 16384 && pj.value("order", std::string()) == "shuffled") {
      const bool best = pj.value("best", false);
      if (!torch_best || (best && !torch_best->value("best", false)) ||
          (best == torch_best->value("best", false) &&
           pj.value("records_per_s", 0.0) > torch_best->value("records_per_s", 0.0)))
        torch_best = &pj;
    }
  const double torch_rps = torch_best ? torch_best->value("median_records_per_s",
                                                          torch_best->value("records_per_s", 0.0))
                                      : 0.0;
  if (torch_best) {
    const result* g = gpufeed_case(16384, "hdf5", "shuffled");
    const double grps = g ? g->extra.value("median_records_per_s", g->records_per_s()) : 0.0;
    std::snprintf(buf, sizeof buf,
                  "PyTorch best (%s): %.0f records/s, %.3f GB/s (range %.3f-%.3f, %d runs); "
                  "gpufeed hdf5 16KiB shuffled %.0f records/s = %.1fx it",
                  torch_best->value("config", torch_best->value("case", std::string())).c_str(),
                  torch_rps, torch_best->value("median_gb_per_s", torch_best->value("gb_per_s", 0.0)),
                  torch_best->value("min_gb_per_s", 0.0), torch_best->value("max_gb_per_s", 0.0),
                  torch_best->value("repeats", 1), grps, torch_rps > 0 ? grps / torch_rps : 0.0);
    s.lines.push_back(buf);
  }

  // Targets (bench/README.md). Throughput targets hold on the device target only.
  const std::size_t k16 = 16384;
  const result* h2d = best_of(rs, [](const result& r) { return r.loader == "limit:pinned_h2d"; });
  for (const char* f : {"hdf5", "lmdb"}) {
    const result* g = gpufeed_case(k16, f, "shuffled");
    if (!g) continue;
    const double g_gb = quoted_gb_per_s(*g);
    const double g_rps = g->extra.value("median_records_per_s", g->records_per_s());
    std::snprintf(buf, sizeof buf, "%.2f GB/s (%s)", g_gb, g->case_name.c_str());
    s.check(std::string(f) + "_16KiB_min", std::string(f) + " 16 KiB shuffled >= 20 GB/s", device,
            g_gb >= 20, g_gb, 20, buf);
    if (std::string(f) == "hdf5") {
      const double goal = h2d ? 0.9 * gb(h2d) : 45;
      std::snprintf(buf, sizeof buf, "%.2f GB/s against %.2f (0.9 x pinned H2D peak %.2f)", g_gb,
                    goal, gb(h2d));
      s.check("hdf5_16KiB_goal", "hdf5 16 KiB shuffled >= 0.9 x pinned H2D peak (~45 GB/s)",
              device && h2d, g_gb >= goal, g_gb, goal, buf);
    } else {
      const result* raw = best_of(rs, [&](const result& r) {
        return r.loader == "limit:lmdb_raw" && r.record_bytes == k16;
      });
      std::snprintf(buf, sizeof buf, "%.2f GB/s against 0.9 x %.2f (best raw, %s)", g_gb, gb(raw),
                    raw ? raw->case_name.c_str() : "not measured");
      s.check("lmdb_16KiB_goal", "lmdb 16 KiB shuffled >= 0.9 x raw parallel LMDB rate",
              device && raw, g_gb >= 0.9 * gb(raw), g_gb, 0.9 * gb(raw), buf);
    }
    const double torch = torch_rps;
    if (std::string(f) == "hdf5") {
      std::snprintf(buf, sizeof buf, "%.0f records/s against PyTorch's %.0f (%.1fx)",
                    g_rps, torch, torch > 0 ? g_rps / torch : 0.0);
      s.check("pytorch_50x", "hdf5 16 KiB shuffled >= 50 x PyTorch DataLoader + h5py, its best configuration",
              device && torch > 0, g_rps >= 50 * torch,
              torch > 0 ? g_rps / torch : 0.0, 50,
              torch > 0 ? buf : "no PyTorch results (run bench/peers/pytorch_dataloader.py, pass --peer)");
    }
  }
  for (const auto& r : rs)
    if (r.loader == "gpufeed" && r.case_name.rfind("overlap/", 0) == 0) {
      const double ratio = r.extra.value("ratio", 0.0);
      std::snprintf(buf, sizeof buf, "step %.3f ms, max(L %.3f, C %.3f) = %.3f ms, ratio %.3f",
                    r.ms_per_batch(), r.extra.value("load_ms", 0.0), r.extra.value("compute_ms", 0.0),
                    r.extra.value("max_ms", 0.0), ratio);
      s.check("overlap_" + r.case_name.substr(8), r.case_name + ": step <= 1.05 x max(load, compute)",
              true, ratio <= 1.05, ratio, 1.05, buf);
    }
  for (const auto& r : rs) {
    if (r.case_name.rfind("pinned_epochs/", 0) == 0)
      s.check("pinned_constant", "pinned bytes constant over " +
                                     std::to_string(r.extra.value("epochs", 0)) + " epochs",
              true, r.extra.value("constant", false), r.extra.value("constant", false) ? 1 : 0, 1,
              r.note);
    if (r.case_name.rfind("first_batch/", 0) == 0) {
      const double ms = r.extra.value("first_batch_ms", 0.0);
      s.check("first_batch_50ms", "first batch <= 50 ms after constructing a loader over " +
                                      std::to_string(r.extra.value("source_records", 0)) + " records",
              true, ms <= 50, ms, 50, r.note + " (" + r.dataset + ")");
    }
  }
  return s;
}

}  // namespace bench
