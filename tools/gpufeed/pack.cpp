// gpufeed pack — pack a directory tree (or the files of a list) into HDF5 or LMDB shards, or
// repack an HDF5 dataset a user already has.
//
//   gpufeed pack INPUT_DIR|--list FILE -o OUT_DIR [--format hdf5|lmdb] [--shard-size 1GiB]
//                [--compress none|deflate[:L]|lz4|zstd[:L]|bitshuffle-lz4] [--chunk-size 1MiB]
//                [--labels] [--datum] [--seed N | --no-shuffle] [--threads N]
//                [--include GLOB]... [--exclude GLOB]... [--prefix shard] [--verify] [--force]
//                [--quiet]
//   gpufeed pack --from FILE.h5 [--dataset data] [--labels[=]NAME] -o OUT_DIR [--compress ...]
//                [--shuffle [--seed N]] ...
//
// Records are shuffled (seed 0 unless --seed) unless --no-shuffle; --from keeps the source's
// row order unless --shuffle. --labels with --format lmdb stores Caffe Datum values (raw LMDB
// values cannot hold a label), as --datum does. --deflate N is --compress deflate:N; gzip is
// deflate (h5py's name for it). A directory's hidden files and folders (.DS_Store, .git) are
// not packed; --include / --exclude filter the rest by glob on their relative path.
// SIGINT / SIGTERM stop the pack like a failure: what it wrote is removed, one line says so, and
// the exit status is 130 / 143.
// Progress goes to stderr: one line updated in place when stderr is a terminal, else a line
// every 5 seconds. The summary goes to stdout. --quiet prints neither (errors still print);
// a note about skipped inputs (FIFOs, sockets, devices) goes to stderr unless --quiet.
#include "gpufeed/pack/pack.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "commands.hpp"
#include "pack_helpers.hpp"
#include "report.hpp"
#include "shards.hpp"

namespace gpufeed::cli {
namespace {

struct pack_args {
  std::string input, list, output, format = "hdf5", prefix = "shard";
  std::string compress, from, dataset = "data";
  std::string label_dataset;  // --labels=NAME / --labels NAME with --from
  std::vector<std::string> include, exclude;
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
  progress_printer(bool tty, const char* unit) : tty_(tty), unit_(unit) {}
  void operator()(const pack_progress& p) {
    const bool done = p.files_done == p.files_total && p.bytes_done == p.bytes_total;
    const auto now = std::chrono::steady_clock::now();
    if (!tty_ && !done && now - last_ < std::chrono::seconds(5)) return;
    last_ = now;
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s %llu/%llu %s  %s/%s  shard %zu/%zu  %.0f %s/s  %.1f MB/s  ETA %s",
                  p.verifying ? "verify" : "pack", static_cast<unsigned long long>(p.files_done),
                  static_cast<unsigned long long>(p.files_total), unit_,
                  human_bytes(static_cast<double>(p.bytes_done)).c_str(),
                  human_bytes(static_cast<double>(p.bytes_total)).c_str(),
                  std::min(p.shards_done + (done ? 0 : 1), p.shards_total), p.shards_total,
                  p.files_per_second, unit_, p.bytes_per_second / 1e6, clock_text(p.eta_seconds).c_str());
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s%s", line, done ? "\n" : "");
    } else {
      std::fprintf(stderr, "%s\n", line);
    }
    std::fflush(stderr);
  }

 private:
  bool tty_;
  const char* unit_;
  std::chrono::steady_clock::time_point last_{};
};

void run_pack(const pack_args& a) {
  const stop_signals handlers;  // from the start: listing a large tree takes a while too
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
    std::error_code ec;
    if (std::filesystem::is_regular_file(a.input, ec) &&
        has_hdf5_signature(a.input, std::filesystem::file_size(a.input, ec)))
      throw config_error("this is an HDF5 file, not a directory of files to pack; to repack its "
                         "dataset use: gpufeed pack --from " + a.input +
                             " --dataset NAME -o " + a.output,
                         file_context(a.input));
    detail::pack::refuse_output_inside_input(a.input, a.output);  // before listing or writing
    skipped_entries skipped;
    inputs = list_directory(a.input, false, &skipped);
    std::erase_if(inputs, [&](const pack_input& in) { return !wanted(in.name, a.include, a.exclude); });
    if (a.labels) {
      // label = index of the first-level folder among the packed folders (hidden ones are not)
      for (const std::string& d : directory_labels(a.input))
        if (!d.starts_with(".")) o.label_names.push_back(d);
      for (pack_input& in : inputs) {
        const auto slash = in.name.find('/');
        if (slash == std::string::npos)
          throw config_error("labels come from subdirectories, but this file is directly in "
                             "the input directory",
                             file_context(in.path));
        const auto it = std::lower_bound(o.label_names.begin(), o.label_names.end(),
                                         in.name.substr(0, slash));
        in.label = static_cast<std::int64_t>(it - o.label_names.begin());
      }
    }
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
                             (skipped.count ? " (only entries that are not regular files)" : "") +
                             (a.include.empty() && a.exclude.empty()
                                  ? ""
                                  : " that --include / --exclude let through"),
                         file_context(a.input));
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
  if (!a.quiet) o.progress = progress_printer(::isatty(2) == 1, from ? "rows" : "files");
  o.cancelled = [] { return stop_signal != 0; };
  pack_result r;
  if (from) {
    repack_source src;
    src.file = a.from;
    src.dataset = a.dataset;
    // --labels NAME / --labels=NAME: the label dataset; --labels alone: "labels".
    if (a.labels)
      src.label_dataset = a.label_dataset.empty() ? std::string(pack_label_dataset)
                                                  : a.label_dataset;
    r = repack_hdf5(src, a.output, o);
  } else {
    r = pack(inputs, a.output, o);
  }
  if (a.quiet) return;
  std::printf(
      "packed %llu %s (%s) into %zu %s shard%s in %s in %.2f s: %.0f %s/s, "
      "%.1f MB/s\n",
      static_cast<unsigned long long>(r.records), from ? "rows" : "files",
      human_bytes(static_cast<double>(r.bytes)).c_str(), r.shards.size(), to_string(r.format),
      r.shards.size() == 1 ? "" : "s", a.output.c_str(), r.seconds,
      r.seconds > 0 ? static_cast<double>(r.records) / r.seconds : 0.0, from ? "rows" : "files",
      r.seconds > 0 ? static_cast<double>(r.bytes) / r.seconds / 1e6 : 0.0);
  std::printf("  %s, %s%s%s\n",
              r.format == shard_format::hdf5
                  ? ("compression " + to_string(o.compression)).c_str()
                  : (r.lmdb_datum ? "values Caffe Datum {data, label}" : "values raw"),
              r.shuffled ? "records shuffled, seed " : "records in input order",
              r.shuffled ? std::to_string(r.seed).c_str() : "",
              from ? "" : "; record index -> name map in manifest.json");
  const std::uint64_t disk = disk_bytes(r.shards);
  std::printf("  on disk %s for %s of records (%.2fx%s)\n",
              human_bytes(static_cast<double>(disk)).c_str(),
              human_bytes(static_cast<double>(r.bytes)).c_str(),
              disk ? static_cast<double>(r.bytes) / static_cast<double>(disk) : 0.0,
              r.format == shard_format::hdf5 && o.compression.codec != pack_codec::none &&
                      disk >= r.bytes
                  ? ": the codec did not shrink these records; --compress none reads faster"
                  : " compression ratio");
}

}  // namespace

void add_pack(CLI::App& app) {
  auto a = std::make_shared<pack_args>();
  CLI::App* cmd = app.add_subcommand(
      "pack",
      "Pack the files under a directory (or named in a list file) into HDF5 or LMDB "
      "shards (records shuffled with a fixed seed unless --no-shuffle; --from keeps the row "
      "order), with a manifest.json. Ctrl-C removes what it wrote and exits 130.");
  auto* in = cmd->add_option("input", a->input,
                             "input directory (files listed recursively, hidden ones skipped)");
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
                  "HDF5: none, deflate[:1-9] (gzip is deflate:4, as h5py's), lz4, zstd[:1-22] "
                  "or bitshuffle-lz4 (chunks of --chunk-size; default none)")
      ->check([](const std::string& v) {
        try {
          (void)parse_compression(v);
          return std::string();
        } catch (const config_error& e) {
          return e.message();
        }
      });
  cmd->add_option("--deflate", a->deflate, "HDF5: deflate level (same as --compress deflate:N)")
      ->check(CLI::Range(0, 9))
      ->capture_default_str();
  cmd->add_option("--chunk-size", a->chunk_size,
                  "HDF5 compressed: chunk size (whole rows with --from)")
      ->transform(CLI::AsSizeValue(true))
      ->default_str("1MiB");
  // An option taking an optional value, so --labels=NAME and --labels NAME mean the same.
  auto* labels = cmd->add_option("--labels", a->label_dataset,
                                 "label = index of the file's first-level subdirectory (sorted); "
                                 "with --from: --labels NAME (or --labels=NAME), the label "
                                 "dataset (alone: 'labels')")
                     ->expected(0, 1);
  labels->excludes(list);
  cmd->add_option("--include", a->include,
                  "pack only files whose path under the input directory matches one of these "
                  "globs ('*.jpg'; repeatable)")
      ->excludes(list);
  cmd->add_option("--exclude", a->exclude,
                  "skip files whose path under the input directory matches one of these globs "
                  "('*.csv'; repeatable)")
      ->excludes(list);
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
  cmd->callback([a, labels] {
    a->labels = labels->count() > 0;
    // `pack --labels DIR -o OUT` (a folder pack): the value is the input directory.
    if (a->from.empty() && a->input.empty() && !a->label_dataset.empty()) {
      a->input = a->label_dataset;
      a->label_dataset.clear();
    }
    if (a->from.empty() && a->input.empty() && a->list.empty())
      throw CLI::RequiredError("an input directory, --list FILE or --from FILE.h5");
    if (a->from.empty() && !a->label_dataset.empty())
      throw CLI::ValidationError("--labels", "a label dataset name applies to --from only "
                                             "(a folder pack's labels are its subdirectories)");
    if (!a->from.empty() && !a->input.empty())
      throw CLI::ValidationError("input", "--from repacks a dataset: give no input directory");
    if (a->from.empty() && a->shuffle)
      throw CLI::ValidationError("--shuffle", "applies to --from (other inputs are shuffled "
                                              "unless --no-shuffle)");
    try {
      run_pack(*a);
    } catch (const cancelled_error& e) {
      // The library removed what it wrote; its message says what. Exit 128 + the signal.
      const int sig = stop_signal ? stop_signal : SIGINT;
      std::string text = e.describe();
      if (text.starts_with("pack: ")) text.erase(0, 6);
      std::fflush(stdout);
      std::fprintf(stderr, "gpufeed pack: %s (%s)\n", one_line(text).c_str(),
                   sig == SIGTERM ? "SIGTERM" : "SIGINT");
      throw CLI::RuntimeError(128 + sig);
    } catch (...) {
      fail_current("pack", "pack: ");
    }
  });
}

}  // namespace gpufeed::cli
