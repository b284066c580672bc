// gpufeed pack — pack a directory tree (or the files of a list) into HDF5 or LMDB shards.
//
//   gpufeed pack INPUT_DIR|--list FILE -o OUT_DIR [--format hdf5|lmdb] [--shard-size 1GiB]
//                [--deflate N] [--chunk-size 1MiB] [--labels] [--datum] [--threads N]
//                [--prefix shard] [--verify] [--force] [--quiet]
//
// Progress goes to stderr: one line updated in place when stderr is a terminal, else a line
// every 5 seconds. The summary goes to stdout. --quiet prints neither (errors still print).
#include "gpufeed/pack/pack.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "commands.hpp"
#include "report.hpp"

namespace gpufeed::cli {
namespace {

struct pack_args {
  std::string input, list, output, format = "hdf5", prefix = "shard";
  std::uint64_t shard_size = 1ull << 30, chunk_size = 1ull << 20;
  int deflate = 0;
  std::size_t threads = 0;
  bool labels = false, datum = false, verify = false, force = false, quiet = false;
};

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

std::string clock_text(double s) {
  const auto t = static_cast<long long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
  return buf;
}

// The progress line: in place on a terminal, else one line every 5 s (logs, CI).
class progress_printer {
 public:
  explicit progress_printer(bool tty) : tty_(tty) {}
  void operator()(const pack_progress& p) {
    const bool done = p.files_done == p.files_total && p.bytes_done == p.bytes_total;
    const auto now = std::chrono::steady_clock::now();
    if (!tty_ && !done && now - last_ < std::chrono::seconds(5)) return;
    last_ = now;
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s %llu/%llu files  %s/%s  shard %zu/%zu  %.0f files/s  %.1f MB/s  ETA %s",
                  p.verifying ? "verify" : "pack", static_cast<unsigned long long>(p.files_done),
                  static_cast<unsigned long long>(p.files_total),
                  human_bytes(static_cast<double>(p.bytes_done)).c_str(),
                  human_bytes(static_cast<double>(p.bytes_total)).c_str(),
                  std::min(p.shards_done + (done ? 0 : 1), p.shards_total), p.shards_total,
                  p.files_per_second, p.bytes_per_second / 1e6, clock_text(p.eta_seconds).c_str());
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s%s", line, done ? "\n" : "");
    } else {
      std::fprintf(stderr, "%s\n", line);
    }
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point last_{};
};

void run_pack(const pack_args& a) {
  std::vector<pack_input> inputs;
  pack_options o;
  if (!a.list.empty()) {
    inputs = read_list_file(a.list);
  } else {
    detail::pack::refuse_output_inside_input(a.input, a.output);  // before listing or writing
    inputs = list_directory(a.input, a.labels);
    if (a.labels) o.label_names = directory_labels(a.input);
  }
  o.format = a.format == "lmdb" ? shard_format::lmdb : shard_format::hdf5;
  o.shard_bytes = a.shard_size;
  o.deflate_level = a.deflate;
  o.chunk_bytes = a.chunk_size;
  o.threads = a.threads;
  o.prefix = a.prefix;
  o.lmdb_datum = a.datum;
  o.verify = a.verify;
  o.force = a.force;
  if (!a.quiet) o.progress = progress_printer(::isatty(2) == 1);
  const pack_result r = pack(inputs, a.output, o);
  if (a.quiet) return;
  std::printf(
      "packed %llu files (%s) into %zu %s shard%s in %s in %.2f s: %.0f files/s, "
      "%.1f MB/s\n",
      static_cast<unsigned long long>(r.records), human_bytes(static_cast<double>(r.bytes)).c_str(),
      r.shards.size(), to_string(r.format), r.shards.size() == 1 ? "" : "s", a.output.c_str(),
      r.seconds, r.seconds > 0 ? static_cast<double>(r.records) / r.seconds : 0.0,
      r.seconds > 0 ? static_cast<double>(r.bytes) / r.seconds / 1e6 : 0.0);
}

}  // namespace

void add_pack(CLI::App& app) {
  auto a = std::make_shared<pack_args>();
  CLI::App* cmd = app.add_subcommand(
      "pack",
      "Pack the files under a directory (or named in a list file) into HDF5 or LMDB "
      "shards, in sorted order, with a manifest.json");
  auto* in = cmd->add_option("input", a->input, "input directory (files listed recursively)");
  auto* list = cmd->add_option("--list", a->list,
                               "list file: one PATH or PATH<TAB>LABEL per line (relative to the "
                               "list's directory)");
  in->excludes(list);
  cmd->add_option("-o,--output", a->output, "output directory (created; must be empty)")
      ->required();
  cmd->add_option("--format", a->format, "shard format")
      ->check(CLI::IsMember({"hdf5", "lmdb"}))
      ->capture_default_str();
  cmd->add_option("--shard-size", a->shard_size, "target record bytes per shard (e.g. 512MiB)")
      ->transform(CLI::AsSizeValue(true))
      ->default_str("1GiB");
  cmd->add_option("--deflate", a->deflate, "HDF5: deflate level, 0 = uncompressed")
      ->check(CLI::Range(0, 9))
      ->capture_default_str();
  cmd->add_option("--chunk-size", a->chunk_size, "HDF5 with --deflate: chunk size")
      ->transform(CLI::AsSizeValue(true))
      ->default_str("1MiB");
  auto* labels = cmd->add_flag("--labels", a->labels,
                               "label = index of the file's first-level subdirectory (sorted)");
  labels->excludes(list);
  cmd->add_flag("--datum", a->datum, "LMDB: store values as Caffe Datum {data, label}");
  cmd->add_option("--threads", a->threads, "reading threads (0 = one per core)")
      ->capture_default_str();
  cmd->add_option("--prefix", a->prefix, "shard file prefix")->capture_default_str();
  cmd->add_flag("--verify", a->verify, "read every record back and compare its crc32");
  cmd->add_flag("--force", a->force, "replace the shards and manifest of an earlier pack");
  cmd->add_flag("-q,--quiet", a->quiet, "no progress or summary");
  cmd->callback([a] {
    if (a->input.empty() && a->list.empty())
      throw CLI::RequiredError("an input directory or --list FILE");
    try {
      run_pack(*a);
    } catch (...) {
      fail_current("pack");
    }
  });
}

}  // namespace gpufeed::cli
