// gpufeed-bench: gpufeed against the naive loader users replace, on the same data in the same
// run, with the machine's limits measured beside them. bench/README.md says how to run it,
// what each case measures, and how to plot the results.
//
//   gpufeed-bench [--quick] [--target cuda|host] [--json] [--trace overlap.json] [--peer torch.json]
//
// Output: progress and the table on stdout (on stderr with --json, which prints one JSON array
// of cases to stdout). Exit status 0 whatever the figures are: the targets are reported
// (PASS/FAIL), not enforced.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_cases.hpp"
#include "bench_data.hpp"
#include "bench_limits.hpp"
#include "bench_naive.hpp"
#include "bench_options.hpp"
#include "bench_result.hpp"
#include "bench_summary.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/lmdb_source.hpp"

namespace bench {
namespace {

class bench_run {
 public:
  bench_run(options o, gpu* g) : opt_(std::move(o)), log_(opt_.json ? stderr : stdout) {
    p_.batch_bytes = static_cast<std::size_t>(opt_.batch_mib * double(1u << 20));
    p_.case_seconds = opt_.case_seconds;
    p_.device = g;
    if (opt_.tiny) p_.warmup_batches = 1, p_.min_batches = 2;
  }

  void say(const std::string& s) {
    std::fprintf(log_, "[%7.1f s] %s\n", seconds_since(start_), s.c_str());
    std::fflush(log_);
  }
  bool skipped(const char* what) const {
    return std::find(opt_.skip.begin(), opt_.skip.end(), what) != opt_.skip.end();
  }
  void add(result r) {
    say(r.case_name + ": " + fmt("%.0f records/s, ", r.records_per_s()) +
        fmt("%.3f GB/s", r.gb_per_s()) + fmt(", stall %.2f", r.stall_fraction) +
        (r.note.empty() ? "" : ", " + r.note));
    results_.push_back(std::move(r));
  }

  int run(const std::string& command, const std::vector<nlohmann::json>& peers) {
    const std::string machine = machine_description();
    const std::string gpu_name = p_.device ? p_.device->describe() : "none (host target)";
    say("gpufeed-bench, " + now_iso8601() + ", target " + p_.target());
    say("machine: " + machine);
    say("gpu: " + gpu_name);
    if (load_average() > 0.5 * std::thread::hardware_concurrency())
      say("WARNING: the machine is busy (load average " + fmt("%.1f", load_average()) +
          "): figures will be low and noisy");
    prepare_data();
    if (opt_.prepare_only) return 0;
    if (!skipped("limits")) limits();
    for (std::size_t rec : opt_.record_sizes) {
      if (!skipped("naive")) naive_cases(rec);
      for (const auto& d : datasets_)
        if (d.record_bytes == rec) sweep(d);
    }
    if (!skipped("overlap")) overlap();
    if (!skipped("first-batch")) first_batch_case();
    if (!skipped("epochs")) epochs_case();

    const summary s = summarise(results_, peers, p_.device != nullptr);
    print_table(log_, results_);
    // The run's own workers count in the load average: warn only well above the core count.
    if (load_average() > 1.5 * std::thread::hardware_concurrency() + 1)
      std::fprintf(log_, "\nWARNING: load average %.1f at the end of the run: other work shared "
                         "the machine; figures are low and noisy\n", load_average());
    std::fprintf(log_, "\nsummary (target %s; every case reads from the page cache, warmed "
                       "before timing; batch = %s of records)\n",
                 p_.target().c_str(), size_name(p_.batch_bytes).c_str());
    for (const auto& l : s.lines) std::fprintf(log_, "  %s\n", l.c_str());
    if (opt_.json) {
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      result info;
      info.case_name = "run";
      info.loader = "info";
      info.target = p_.target();
      info.extra["date"] = now_iso8601();
      info.extra["machine"] = machine;
      info.extra["gpu"] = gpu_name;
      info.extra["command"] = command;
      info.extra["page_cache"] = "warmed: every data set read once before timing";
      info.extra["batch_bytes"] = p_.batch_bytes;
      out.push_back(info.to_json());
      for (const auto& r : results_) out.push_back(r.to_json());
      for (const auto& r : s.rows) out.push_back(r.to_json());
      for (const auto& r : s.checks) out.push_back(r.to_json());
      std::cout << out.dump(1) << std::endl;
    }
    return 0;
  }

 private:
  file_set files_for(std::size_t rec) const {
    for (const auto& f : files_)
      if (f.record_bytes == rec) return f;
    fail("no files for " + size_name(rec));
  }
  std::uint64_t records_for(std::size_t rec) const {
    return std::max<std::uint64_t>(8, static_cast<std::uint64_t>(opt_.dataset_mib * double(1u << 20)) / rec);
  }

  void prepare_data() {
    const fs::path dir = opt_.data_dir;
    fs::create_directories(dir);
    auto name = [](const char* kind, std::size_t rec, std::uint64_t n) {
      return std::string(kind) + "_r" + std::to_string(rec) + "_n" + std::to_string(n);
    };
    for (std::size_t rec : opt_.record_sizes) {
      const std::uint64_t n = records_for(rec);
      for (const auto& f : opt_.formats) {
        dataset d;
        d.record_bytes = rec;
        d.records = n;
        if (f == "hdf5") {
          d.fmt = format::hdf5;
          d.path = dir / (name("hdf5", rec, n) + ".h5");
        } else if (f == "hdf5-deflate") {
          d.fmt = format::hdf5_deflate;
          d.chunk_rows = chunk_rows_for(rec);
          d.path = dir / (name("hdf5z", rec, n) + "_c" + std::to_string(d.chunk_rows) + ".h5");
        } else {
          d.fmt = format::lmdb;
          d.path = dir / name("lmdb", rec, n);
        }
        datasets_.push_back(d);
      }
      file_set fs_;
      fs_.record_bytes = rec;
      fs_.files = std::min(n, opt_.naive_files);
      fs_.dir = dir / name("files", rec, fs_.files);
      files_.push_back(fs_);
    }
    epoch_set_.fmt = format::hdf5;
    epoch_set_.record_bytes = 16384;
    epoch_set_.records = opt_.epoch_records;
    epoch_set_.path = dir / (name("hdf5", 16384, opt_.epoch_records) + ".h5");

    std::uint64_t total = 0;
    auto make = [&](const auto& what, const std::string& label, const fs::path& path) {
      const auto t0 = clock_type::now();
      if (ensure(what)) say("wrote " + label + " in " + fmt("%.1f s", seconds_since(t0)));
      const std::uint64_t bytes = warm_page_cache(path);
      total += bytes;
      say(label + ": " + path.string() + ", " + fmt("%.1f MiB", double(bytes) / (1u << 20)) +
          " read once to warm the page cache, " + fmt("%.0f%% resident", 100 * resident_fraction(path)));
    };
    for (const auto& d : datasets_)
      make(d, d.name() + " (" + std::to_string(d.records) + " records)", d.path);
    if (!skipped("naive"))
      for (const auto& f : files_)
        make(f, "files/" + size_name(f.record_bytes) + " (" + std::to_string(f.files) + " files)", f.dir);
    if (!skipped("epochs")) make(epoch_set_, "epochs data set", epoch_set_.path);
    const double avail = static_cast<double>(::sysconf(_SC_AVPHYS_PAGES)) *
                         static_cast<double>(::sysconf(_SC_PAGESIZE));
    if (static_cast<double>(total) > 0.8 * (avail + static_cast<double>(total)))
      say("WARNING: the data sets (" + fmt("%.1f GiB", double(total) / double(1ull << 30)) +
          ") may not fit in the page cache: cases may read from storage");
  }

  void limits() {
    if (p_.device) {
      add(limit_pinned_h2d(*p_.device, std::size_t{16} << 20, p_));
      add(limit_pinned_h2d(*p_.device, std::size_t{256} << 20, p_));
    }
    std::pmr::memory_resource* mr = p_.device ? p_.device->pinned() : gpufeed::pageable_resource::instance();
    for (const auto& d : datasets_) {
      if (d.fmt == format::hdf5)
        for (std::size_t w : opt_.workers) {
          add(limit_pread(d, static_cast<unsigned>(w), p_, mr));
          add(limit_mmap(d, static_cast<unsigned>(w), p_, mr));
        }
      if (d.fmt == format::lmdb)
        for (auto& r : limit_lmdb(d, opt_.workers, p_, mr)) add(std::move(r));
    }
  }

  // One untimed sequential epoch through a loader, so the source's map (LMDB's, a mapped HDF5
  // shard's) is populated (page faults of a fresh mapping are a first-epoch cost, not the steady
  // state being measured).
  template <class Source>
  void populate(const Source& src, const dataset& d) {
    const auto t0 = clock_type::now();
    gpufeed::loader_config c = make_config(p_, p_.batch_records(d.record_bytes, d.records),
                                           sweep_point{opt_.workers.back(), 4, opt_.streams},
                                           gpufeed::sample_order::sequential);
    c.epochs = 1;
    gpufeed::loader<Source, dynamic_options> l(src, c);
    std::uint64_t n = 0;
    while (auto b = l.next()) n += b->size();
    say(d.name() + ": one untimed epoch (" + std::to_string(n) + " records, " +
        fmt("%.1f s", seconds_since(t0)) + ") to populate the source's map");
  }

  // The naive loops (bench_naive.hpp): per record, per batch on one thread, per batch on each
  // --naive-threads count; each run --repeats times (median and range).
  void naive_cases(std::size_t rec) {
    const file_set f = files_for(rec);
    std::vector<naive_spec> specs{{naive_copy::per_record, 1, 0}, {naive_copy::per_batch, 1, 0}};
    for (std::size_t t : opt_.naive_threads)
      if (t > 1) specs.push_back({naive_copy::per_batch, static_cast<unsigned>(t), 0});
    for (const auto& spec : specs)
      add(repeated(opt_.repeats, [&] { return run_naive(f, p_, spec); }));
  }

  template <class Source>
  void sweep_source(const Source& src, const dataset& d, gpufeed::sample_order order) {
    for (std::size_t w : opt_.workers)
      for (std::size_t pf : opt_.prefetch) {
        run_spec spec;
        spec.at = sweep_point{w, pf, opt_.streams};
        spec.order = order;
        add(run_gpufeed(src, d, p_, spec));
      }
  }

  // The sweep's best configuration, run --repeats more times: the median and range the summary
  // quotes (the sweep's best single run is picked for being high; these runs are not).
  template <class Source>
  void headline(const Source& src, const dataset& d, gpufeed::sample_order order) {
    if (opt_.repeats < 2) return;
    const result* best = best_of(results_, [&](const result& r) {
      return r.loader == "gpufeed" && r.dataset == d.name() && r.order == gpufeed::to_string(order) &&
             r.case_name.rfind("gpufeed/", 0) == 0;
    });
    if (!best) return;
    run_spec spec;
    spec.at = sweep_point{best->workers, best->prefetch, opt_.streams};
    spec.order = order;
    result r = repeated(opt_.repeats, [&] { return run_gpufeed(src, d, p_, spec); });
    r.case_name += "/median";
    r.extra["headline"] = true;
    add(std::move(r));
  }

  // Sequential reads of compressed chunks, with worker tasks of whole HDF5 chunks
  // (loader_config::chunk_records = rows per chunk), every worker count at the best prefetch. The
  // loader's automatic tasks (~256 KiB) split a ~1 MiB chunk among workers, each of which then
  // inflates the whole chunk; this case shows what aligning the tasks gains.
  template <class Source>
  void aligned_chunks(const Source& src, const dataset& d) {
    const result* seq = best_of(results_, [&](const result& r) {
      return r.loader == "gpufeed" && r.dataset == d.name() && r.order == "sequential";
    });
    if (!seq) return;
    const std::size_t prefetch = seq->prefetch;
    const std::size_t chunk = std::min<std::size_t>(d.chunk_rows, seq->batch_size);
    for (std::size_t w : opt_.workers) {
      run_spec spec;
      spec.at = sweep_point{w, prefetch, opt_.streams};
      spec.order = gpufeed::sample_order::sequential;
      spec.chunk_records = chunk;
      spec.case_name = "gpufeed/" + d.name() + "/seq-aligned/w" + std::to_string(w) + "/p" +
                       std::to_string(prefetch) + (p_.device ? "/s" + std::to_string(opt_.streams) : "");
      add(run_gpufeed(src, d, p_, spec));
    }
  }

  // Shuffled reads of compressed chunks inflate a whole chunk per record: run that case once, at
  // the best sequential configuration, when its estimated time fits.
  template <class Source>
  void shuffled_chunks(const Source& src, const dataset& d) {
    const result* seq = best_of(results_, [&](const result& r) {
      return r.loader == "gpufeed" && r.dataset == d.name() && r.order == "sequential";
    });
    if (!seq || seq->gb_per_s() <= 0) return;
    const double chunk_bytes = double(d.chunk_rows) * double(d.record_bytes);
    const double per_batch = double(p_.batch_records(d.record_bytes, d.records)) * chunk_bytes /
                             (seq->gb_per_s() * 1e9);
    const double estimate = double(p_.warmup_batches + p_.min_batches) * per_batch;
    if (estimate > 3 * p_.case_seconds + 1) {
      say(d.name() + " shuffled: skipped, each record inflates its " +
          size_name(static_cast<std::size_t>(chunk_bytes)) + " chunk (estimated " +
          fmt("%.1f s", estimate) + " for the minimum batches)");
      return;
    }
    run_spec spec;
    spec.at = sweep_point{seq->workers, seq->prefetch, opt_.streams};
    add(run_gpufeed(src, d, p_, spec));
  }

  // The sweep and its repeated best configuration in each of --orders.
  template <class Source>
  void sweep_orders(const Source& src, const dataset& d) {
    for (const auto& name : opt_.orders) {
      const gpufeed::sample_order order = order_named(name);
      sweep_source(src, d, order);
      headline(src, d, order);
    }
  }

  static gpufeed::sample_order order_named(const std::string& name) {
    for (auto o : {gpufeed::sample_order::shuffled, gpufeed::sample_order::sequential,
                   gpufeed::sample_order::block_shuffled})
      if (name == gpufeed::to_string(o)) return o;
    throw std::runtime_error("unknown order " + name);
  }

  void sweep(const dataset& d) {
    const auto t0 = clock_type::now();
    if (d.fmt == format::lmdb) {
      const gpufeed::lmdb_source src(d.path);
      say("opened " + d.name() + " as lmdb_source in " + fmt("%.1f ms", seconds_since(t0) * 1e3));
      populate(src, d);
      sweep_orders(src, d);
    } else if (d.fmt == format::hdf5) {
      for (const auto& reads : opt_.hdf5_reads) {  // each read method asked, as its own format
        dataset v = d;
        gpufeed::hdf5_options o;
        if (reads == "pread") o.reads = gpufeed::hdf5_options::read_method::pread;
        if (reads == "map") o.reads = gpufeed::hdf5_options::read_method::map;
        if (reads != "automatic") v.reads = reads;
        const auto t1 = clock_type::now();
        const gpufeed::hdf5_source src(d.path, o);
        say("opened " + v.name() + " as hdf5_source in " + fmt("%.1f ms", seconds_since(t1) * 1e3) +
            ", read path " + gpufeed::to_string(src.shards()[0].read_path) +
            (src.shards()[0].mapped ? " (memory map)" : " (pread)"));
        if (src.shards()[0].mapped) populate(src, v);
        sweep_orders(src, v);
      }
    } else {
      const gpufeed::hdf5_source src(d.path);
      say("opened " + d.name() + " as hdf5_source in " + fmt("%.1f ms", seconds_since(t0) * 1e3) +
          ", read path " + gpufeed::to_string(src.shards()[0].read_path));
      sweep_source(src, d, gpufeed::sample_order::sequential);
      aligned_chunks(src, d);
      shuffled_chunks(src, d);
    }
  }

  // For each overlap data set: L = the best load-only case's time per batch; then the model at
  // C = 0.5 L, L, 2 L per batch, for gpufeed and (once per record size) for the naive loop.
  void overlap() {
    for (std::size_t rec : opt_.overlap_sizes) {
      bool naive_done = skipped("naive");
      for (const auto& d : datasets_) {
        if (d.record_bytes != rec || d.fmt == format::hdf5_deflate) continue;
        if (d.fmt == format::lmdb) {
          const gpufeed::lmdb_source src(d.path);
          populate(src, d);
          overlap_dataset(src, d, naive_done);
        } else {
          overlap_dataset(gpufeed::hdf5_source(d.path), d, naive_done);
        }
      }
    }
  }

  // L: the headline's median time per batch when the data set has one, else the best sweep
  // case's. The naive rows measure their own L_naive in the same run (each batch's load time).
  template <class Source>
  void overlap_dataset(const Source& src, const dataset& d, bool& naive_done) {
    auto keep = [&](const result& r) {
      return r.loader == "gpufeed" && r.dataset == d.name() && r.order == "shuffled" &&
             r.case_name.rfind("gpufeed/", 0) == 0;
    };
    const result* best =
        best_of(results_, [&](const result& r) { return keep(r) && r.extra.value("headline", false); });
    if (!best) best = best_of(results_, keep);
    if (!best) return;
    const double load_ms = best->ms_per_batch();
    const std::size_t batch = best->batch_size;
    const sweep_point at{best->workers, best->prefetch, opt_.streams};
    const bool with_naive = !naive_done;
    naive_done = true;
    const file_set files = with_naive ? files_for(d.record_bytes) : file_set{};
    for (double f : {0.5, 1.0, 2.0}) {
      run_spec spec;
      spec.at = at;
      spec.compute_ms = f * load_ms;
      spec.case_name = "overlap/" + d.name() + "/C=" + fmt("%.1fL", f);
      if (f == 1.0 && !traced_ && !opt_.trace.empty()) {
        spec.trace_path = opt_.trace;
        traced_ = true;
      }
      result r = run_gpufeed(src, d, p_, spec);
      annotate(r, load_ms, spec.compute_ms);
      add(std::move(r));
      if (with_naive) {  // the same model time per record, on the naive loop's own batch
        const std::size_t naive_batch = p_.batch_records(d.record_bytes, files.files);
        const double c = spec.compute_ms * double(naive_batch) / double(batch);
        result n = run_naive(files, p_, naive_spec{naive_copy::per_record, 1, c});
        n.case_name = "overlap/naive/" + size_name(d.record_bytes) + "/C=" + fmt("%.1fL", f);
        annotate(n, n.extra.value("load_ms", 0.0), c);
        add(std::move(n));
      }
    }
  }

  // Step time against max(load, compute); the naive loop's expected step is load + compute.
  static void annotate(result& r, double load_ms, double compute_ms) {
    const double step = r.ms_per_batch();
    const double bound = std::max(load_ms, compute_ms);
    r.extra["load_ms"] = load_ms;
    r.extra["step_ms"] = step;
    r.extra["max_ms"] = bound;
    r.extra["ratio"] = bound > 0 ? step / bound : 0.0;
    r.extra["model_busy_fraction"] = step > 0 ? std::min(1.0, r.extra.value("compute_ms", 0.0) / step) : 0.0;
    if (r.loader == "naive") r.extra["expected_step_ms"] = load_ms + compute_ms;  // L_naive + C
    r.note = "step " + fmt("%.3f ms", step) + " vs max(L,C) " + fmt("%.3f ms", bound) +
             fmt(" = %.3fx", bound > 0 ? step / bound : 0.0);
  }

  sweep_point best_point(std::size_t rec) const {
    const result* b = best_of(results_, [&](const result& r) {
      return r.loader == "gpufeed" && r.record_bytes == rec && r.order == "shuffled" &&
             r.case_name.rfind("gpufeed/", 0) == 0;
    });
    if (b) return {b->workers, b->prefetch, opt_.streams};
    return {opt_.workers.back(), 4, opt_.streams};
  }

  // Loader construction to first batch over 1 M records: the 1 KiB HDF5 file when it has that
  // many records, else a synthetic in-memory source of 1 M x 1 KiB records.
  void first_batch_case() {
    constexpr std::uint64_t million = 1000000;
    for (const auto& d : datasets_)
      if (d.fmt == format::hdf5 && d.records >= million) {
        const gpufeed::hdf5_source src(d.path);
        add(first_batch(src, d.name(), d.record_bytes, p_, best_point(d.record_bytes)));
        return;
      }
    const synthetic_source src(million, 1024);
    add(first_batch(src, "memory/1KiB", 1024, p_, best_point(1024)));
  }

  void epochs_case() {
    const gpufeed::hdf5_source src(epoch_set_.path);
    add(pinned_over_epochs(src, epoch_set_, p_, best_point(16384), opt_.epochs));
  }

  options opt_;
  std::FILE* log_;
  params p_;
  clock_type::time_point start_ = clock_type::now();
  std::vector<dataset> datasets_;
  std::vector<file_set> files_;
  dataset epoch_set_;
  std::vector<result> results_;
  bool traced_ = false;
};

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  using bench::options;
  options o;
  CLI::App app{"gpufeed-bench: gpufeed against the naive loader and the machine's limits, on the "
               "same data in the same run (see bench/README.md)"};
  bench::add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  try {
    bench::apply_presets(o, app);
    for (std::size_t r : o.record_sizes)
      if (r == 0) throw std::runtime_error("record sizes must be positive");
    if (o.workers.empty() || o.prefetch.empty() || o.record_sizes.empty())
      throw std::runtime_error("--workers, --prefetch and --record-sizes need values");
    std::vector<nlohmann::json> peers;
    if (!o.peer.empty()) {
      std::ifstream in(o.peer);
      if (!in) throw std::runtime_error("cannot read " + o.peer);
      const auto j = nlohmann::json::parse(in);
      for (const auto& e : j) peers.push_back(e);
    }
    std::string why;
    std::unique_ptr<bench::gpu> g;
    if (o.target != "host") {
      g = bench::open_gpu(o.device, why);
      if (!g && o.target == "cuda") {
        std::fprintf(stderr, "gpufeed-bench: --target cuda: %s\n", why.c_str());
        return 2;
      }
      if (!g) std::fprintf(o.json ? stderr : stdout, "gpufeed-bench: host target: %s\n", why.c_str());
    }
    std::string command;
    for (int a = 0; a < argc; ++a) command += (a ? " " : "") + std::string(argv[a]);
    bench::bench_run run(std::move(o), g.get());
    return run.run(command, peers);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpufeed-bench: %s\n", e.what());
    return 1;
  }
}
