// gpufeed-bench: the machine description and the summary — gpufeed's best against the naive
// loader, the measured limits and (given --peer) PyTorch, and the targets checked.
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
  char buf[512];
  s.lines.push_back("record  dataset        order       naive GB/s  gpufeed GB/s  best config"
                    "   x naive  limit GB/s  (same threads)  x limit");
  for (const auto& [rec, _] : sizes) {
    const result* naive = best_of(rs, [&](const result& r) {
      return r.loader == "naive" && r.record_bytes == rec && r.extra.value("compute_ms", 0.0) == 0;
    });
    for (const char* f : {"hdf5", "hdf5-deflate", "lmdb"})
      for (const char* order : {"shuffled", "sequential"}) {
        const result* g = best_of(rs, [&](const result& r) {
          return r.loader == "gpufeed" && r.case_name.rfind("gpufeed/", 0) == 0 &&
                 r.record_bytes == rec && r.format == f && r.order == order;
        });
        if (!g) continue;
        const std::string kind = std::string(f) == "lmdb" ? "limit:lmdb_raw" : "limit:pread";
        const result* lim = best_of(rs, [&](const result& r) {
          return r.loader == kind && r.record_bytes == rec && r.workers == g->workers;
        });
        const bool has_limit = lim && std::string(f) != "hdf5-deflate";
        std::string config = "w" + std::to_string(g->workers) + "/p" + std::to_string(g->prefetch);
        if (device) config += "/s" + std::to_string(g->streams);
        if (g->extra.value("chunk_records", 0) > 0) config += "/aligned";
        std::snprintf(buf, sizeof buf, "%-7s %-14s %-10s %11.3f  %12.3f  %-11s %8.1fx  %10.3f  %-14s %8.2f",
                      size_name(rec).c_str(), f, order, gb(naive), gb(g), config.c_str(),
                      gb(naive) > 0 ? gb(g) / gb(naive) : 0.0, has_limit ? gb(lim) : 0.0,
                      has_limit ? lim->loader.substr(6).c_str() : "-",
                      has_limit && gb(lim) > 0 ? gb(g) / gb(lim) : 0.0);
        s.lines.push_back(buf);
      }
  }

  // Targets (bench/README.md). Throughput targets hold on the device target only.
  const std::size_t k16 = 16384;
  const result* h2d = best_of(rs, [](const result& r) { return r.loader == "limit:pinned_h2d"; });
  for (const char* f : {"hdf5", "lmdb"}) {
    const result* g = best_of(rs, [&](const result& r) {
      return r.loader == "gpufeed" && r.case_name.rfind("gpufeed/", 0) == 0 &&
             r.record_bytes == k16 && r.format == f && r.order == "shuffled";
    });
    if (!g) continue;
    std::snprintf(buf, sizeof buf, "%.2f GB/s (%s)", gb(g), g->case_name.c_str());
    s.check(std::string(f) + "_16KiB_min", std::string(f) + " 16 KiB shuffled >= 20 GB/s", device,
            gb(g) >= 20, gb(g), 20, buf);
    if (std::string(f) == "hdf5") {
      const double goal = h2d ? 0.9 * gb(h2d) : 45;
      std::snprintf(buf, sizeof buf, "%.2f GB/s against %.2f (0.9 x pinned H2D peak %.2f)", gb(g),
                    goal, gb(h2d));
      s.check("hdf5_16KiB_goal", "hdf5 16 KiB shuffled >= 0.9 x pinned H2D peak (~45 GB/s)",
              device && h2d, gb(g) >= goal, gb(g), goal, buf);
    } else {
      const result* raw = best_of(rs, [&](const result& r) {
        return r.loader == "limit:lmdb_raw" && r.record_bytes == k16;
      });
      std::snprintf(buf, sizeof buf, "%.2f GB/s against 0.9 x %.2f (best raw, %s)", gb(g), gb(raw),
                    raw ? raw->case_name.c_str() : "not measured");
      s.check("lmdb_16KiB_goal", "lmdb 16 KiB shuffled >= 0.9 x raw parallel LMDB rate",
              device && raw, gb(g) >= 0.9 * gb(raw), gb(g), 0.9 * gb(raw), buf);
    }
    double torch = 0;
    for (const auto& pj : peers)
      if (pj.value("record_bytes", 0) == static_cast<int>(k16) &&
          pj.value("order", std::string()) == "shuffled")
        torch = std::max(torch, pj.value("records_per_s", 0.0));
    if (std::string(f) == "hdf5") {
      std::snprintf(buf, sizeof buf, "%.0f records/s against PyTorch's %.0f (%.1fx)",
                    g->records_per_s(), torch, torch > 0 ? g->records_per_s() / torch : 0.0);
      s.check("pytorch_50x", "hdf5 16 KiB shuffled >= 50 x PyTorch DataLoader + h5py shuffled",
              device && torch > 0, g->records_per_s() >= 50 * torch,
              torch > 0 ? g->records_per_s() / torch : 0.0, 50,
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
