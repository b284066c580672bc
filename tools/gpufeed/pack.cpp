// gpufeed pack — pack a directory tree (or the files of a list) into HDF5 or LMDB shards, or
// repack an HDF5 dataset a user already has.
//
//   gpufeed pack INPUT_DIR|--list FILE -o OUT_DIR [--format hdf5|lmdb] [--shard-size 1GiB]
//                [--compress none|deflate[:L]|lz4|zstd[:L]|bitshuffle-lz4] [--chunk-size 1MiB]
//                [--labels] [--datum] [--seed N | --no-shuffle] [--threads N]
//                [--prefix shard] [--verify] [--force] [--quiet]
//   gpufeed pack --from FILE.h5 [--dataset data] [--labels NAME] -o OUT_DIR [--compress ...]
//                [--shuffle [--seed N]] ...
//
// Records are shuffled (seed 0 unless --seed) unless --no-shuffle; --from keeps the source's
// row order unless --shuffle. --labels with --format lmdb stores Caffe Datum values (raw LMDB
// values cannot hold a label), as --datum does. --deflate N is --compress deflate:N.
// Progress goes to stderr: one line updated in place when stderr is a terminal, else a line
// every 5 seconds. The summary goes to stdout. --quiet prints neither (errors still print);
// a note about skipped inputs (FIFOs, sockets, devices) goes to stderr unless --quiet.
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
  std::string compress, from, dataset = "data";
  std::uint64_t shard_size = 1ull << 30, chunk_size = 1ull << 20, seed = 0;
  int deflate = 0;
  std::size_t threads = 0;
  bool labels = false, datum = false, verify = false, force = false, quiet = false;
  bool no_shuffle = false, shuffle = false;
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
  const bool from = !a.from.empty();
  if (from) {
    // nothing to list: the dataset's rows are the records
  } else if (!a.list.empty()) {
    inputs = read_list_file(a.list);
    if (inputs.empty())
      throw config_error("no input files: the list file names none", file_context(a.list));
  } else {
    detail::pack::refuse_output_inside_input(a.input, a.output);  // before listing or writing
    skipped_entries skipped;
    inputs = list_directory(a.input, a.labels, &skipped);
    if (skipped.count && !a.quiet)
      std::fprintf(stderr,
                   "gpufeed pack: skipped %llu entr%s under '%s' that %s (FIFO, socket or "
                   "device): '%s'%s\n",
                   static_cast<unsigned long long>(skipped.count), skipped.count == 1 ? "y" : "ies",
                   one_line(a.input).c_str(),
                   skipped.count == 1 ? "is not a regular file" : "are not regular files",
                   one_line(skipped.first).c_str(), skipped.count == 1 ? "" : " first");
    if (inputs.empty())
      throw config_error(std::string("no input files in the input directory") +
                             (skipped.count ? " (only entries that are not regular files)" : ""),
                         file_context(a.input));
    if (a.labels) o.label_names = directory_labels(a.input);
  }
  o.format = a.format == "lmdb" ? shard_format::lmdb : shard_format::hdf5;
  o.shard_bytes = a.shard_size;
  if (!a.compress.empty()) o.compression = parse_compression(a.compress);
  if (!a.compress.empty() && a.deflate > 0)
    throw config_error("--deflate N is --compress deflate:N: give one of them");
  if (a.deflate > 0) o.compression = {pack_codec::deflate, a.deflate};
  o.chunk_bytes = a.chunk_size;
  o.shuffle = from ? a.shuffle : !a.no_shuffle;
  o.seed = a.seed;
  o.threads = a.threads;
  o.prefix = a.prefix;
  // Labels in LMDB need Datum values: what --labels --format lmdb means.
  o.lmdb_datum = a.datum || (o.format == shard_format::lmdb && a.labels);
  o.verify = a.verify;
  o.force = a.force;
  if (!a.quiet) o.progress = progress_printer(::isatty(2) == 1);
  pack_result r;
  if (from) {
    repack_source src;
    src.file = a.from;
    src.dataset = a.dataset;
    // --labels NAME: the label dataset (given after --labels, it parses as the positional).
    if (a.labels) src.label_dataset = a.input.empty() ? std::string(pack_label_dataset) : a.input;
    r = repack_hdf5(src, a.output, o);
  } else {
    r = pack(inputs, a.output, o);
  }
  if (a.quiet) return;
  std::printf(
      "packed %llu %s (%s) into %zu %s shard%s in %s in %.2f s: %.0f files/s, "
      "%.1f MB/s\n",
      static_cast<unsigned long long>(r.records), from ? "rows" : "files",
      human_bytes(static_cast<double>(r.bytes)).c_str(), r.shards.size(), to_string(r.format),
      r.shards.size() == 1 ? "" : "s", a.output.c_str(), r.seconds,
      r.seconds > 0 ? static_cast<double>(r.records) / r.seconds : 0.0,
      r.seconds > 0 ? static_cast<double>(r.bytes) / r.seconds / 1e6 : 0.0);
  std::printf("  %s, %s%s%s\n",
              r.format == shard_format::hdf5
                  ? ("compression " + to_string(o.compression)).c_str()
                  : (r.lmdb_datum ? "values Caffe Datum {data, label}" : "values raw"),
              r.shuffled ? "records shuffled, seed " : "records in input order",
              r.shuffled ? std::to_string(r.seed).c_str() : "",
              from ? "" : "; record index -> name map in manifest.json");
}

}  // namespace

void add_pack(CLI::App& app) {
  auto a = std::make_shared<pack_args>();
  CLI::App* cmd = app.add_subcommand(
      "pack",
      "Pack the files under a directory (or named in a list file) into HDF5 or LMDB "
      "shards, in sorted order, with a manifest.json");
  auto* in = cmd->add_option("input", a->input,
                             "input directory (files listed recursively); with --from, the label "
                             "dataset named after --labels");
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
  auto* from = cmd->add_option("--from", a->from,
                               "repack this HDF5 file's --dataset (any chunking and filter "
                               "gpufeed reads) into gpufeed shards");
  from->excludes(list);
  cmd->add_option("--dataset", a->dataset, "with --from: the dataset holding the records")
      ->capture_default_str();
  cmd->add_option("--compress", a->compress,
                  "HDF5: none, deflate[:1-9], lz4, zstd[:1-22] or bitshuffle-lz4 (chunks of "
                  "--chunk-size; default none)");
  cmd->add_option("--deflate", a->deflate, "HDF5: deflate level (same as --compress deflate:N)")
      ->check(CLI::Range(0, 9))
      ->capture_default_str();
  cmd->add_option("--chunk-size", a->chunk_size,
                  "HDF5 compressed: chunk size (whole rows with --from)")
      ->transform(CLI::AsSizeValue(true))
      ->default_str("1MiB");
  auto* labels = cmd->add_flag("--labels", a->labels,
                               "label = index of the file's first-level subdirectory (sorted); "
                               "with --from: --labels NAME, the label dataset");
  labels->excludes(list);
  cmd->add_flag("--datum", a->datum,
                "LMDB: store values as Caffe Datum {data, label} (implied by --labels)");
  auto* seed = cmd->add_option("--seed", a->seed, "seed of the pack-time shuffle")
                   ->capture_default_str();
  auto* noshuf =
      cmd->add_flag("--no-shuffle", a->no_shuffle, "keep the input order (sorted listing)");
  noshuf->excludes(seed);
  cmd->add_flag("--shuffle", a->shuffle, "with --from: shuffle the rows (slow on compressed data)")
      ->excludes(noshuf);
  cmd->add_option("--threads", a->threads, "reading threads (0 = one per core)")
      ->capture_default_str();
  cmd->add_option("--prefix", a->prefix, "shard file prefix")->capture_default_str();
  cmd->add_flag("--verify", a->verify, "read every record back and compare its crc32");
  cmd->add_flag("--force", a->force, "replace the shards and manifest of an earlier pack");
  cmd->add_flag("-q,--quiet", a->quiet, "no progress or summary");
  cmd->callback([a] {
    if (a->from.empty() && a->input.empty() && a->list.empty())
      throw CLI::RequiredError("an input directory, --list FILE or --from FILE.h5");
    if (!a->from.empty() && !a->input.empty() && !a->labels)
      throw CLI::ValidationError("input", "--from repacks a dataset: give no input directory");
    if (a->from.empty() && a->shuffle)
      throw CLI::ValidationError("--shuffle", "applies to --from (other inputs are shuffled "
                                              "unless --no-shuffle)");
    try {
      run_pack(*a);
    } catch (...) {
      fail_current("pack", "pack: ");
    }
  });
}

}  // namespace gpufeed::cli
