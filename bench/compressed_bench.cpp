// compressed_bench — the loader on data as users store it: compressed HDF5 (h5py's automatic
// chunks, or shards from `gpufeed pack --compress`) and shards evicted from the page cache, in
// each record order, beside the rates that bound it measured in the same run.
//
//   compressed_bench [options] FILE.h5...            (one record space over the files, "data")
//     --cases read,h2d,decode1,decodeN,sequential,block,shuffled,quality   which cases (default
//                      decode1, sequential, block, shuffled)
//     --workers N (14)  --prefetch P (8)  --batch B (512)  --seconds S (4, per case)
//     --chunk-records R   records per worker task (loader_config::chunk_records; 0: automatic)
//     --windows W1,W2,...   block_shuffled windows (units) for the block and quality cases
//                      (0 = the default window; block reports each other one as block/w<W>)
//     --cold           evict the files (posix_fadvise DONTNEED) before every case and measure
//                      the buffered sequential read rate (as `dd bs=1M`) first
//     --target cuda|host (cuda when a GPU is usable)   --json   (one JSON array on stdout)
//     --numa auto|off|N   loader_config::numa (auto: the GPU's node; N: that node, e.g. the far
//                      one, to measure what placement is worth)
//     --ranks-from-env    the loader's rank and world size from the launcher (mpirun, torchrun):
//                      one process per GPU, each delivering its share (scripts/gpu-delivery.sh)
//     --no-decode-ahead   loader_config::decode_ahead = false (block_shuffled; on by default)
//     --decode automatic|host|device   loader_config::decode (where chunks are decoded; the
//                         loader cases report stats().device_decode under "device_decode")
//     --device-cache-mib N   loader_config::device_cache_bytes (0: automatic)
//     --keep-cache     keep decoded chunks across epochs (by default the cache forgets them at
//                      each epoch's end, keeping their buffers, so each epoch's rate is a
//                      decode rate into memory already faulted in, as in a long run)
//
// Cases (rates are delivered, decoded bytes per second):
//   dd          cold only: one thread reads every file front to back in 1 MiB reads
//   read        --workers threads read the files (their slices, 1 MiB preads, after an untimed
//               pass): the host's parallel read rate from the page cache, without the loader
//   h2d         cudaMemcpyAsync of 16 MiB from pinned memory to the GPU: its pinned H2D rate
//   decode1     one reader, records in file order: each chunk is read and decoded once; the
//               single-thread decode rate of these chunks (plus one copy), timed after an
//               untimed pass (the cache's buffers faulted in, as in the loader cases)
//   decodeN     --workers independent readers, each decode1 on its own slice of the records:
//               the machine's N-core decode rate without the loader (reported as decode<N>)
//   sequential  the loader, sequential order, N workers, into the target
//   block       the loader, block_shuffled order, default window (and each of --windows)
//   shuffled    the loader, full random order (bounded by --seconds: it may finish no epoch)
//   quality     per window (and full random): distinct labels per batch and label entropy per
//               batch over one whole epoch of the order the loader would use (its resolved
//               sampler, no reads), with the decoded bytes of one window — what the decoded-chunk
//               cache holds to decode each unit once; needs the files' labels (a class-sorted data
//               set shows the trade-off; bench/make_h5py_data.py writes one)
// Each loader case reports the decoded bytes per delivered byte (decode amplification) from
// stats(). Exit status 0 whatever the figures; 2 for usage errors.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_gpu.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/loader.hpp"

namespace loading = gpufeed::detail::loading;

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

struct options {
  std::vector<std::string> files;
  std::vector<std::string> cases{"decode1", "sequential", "block", "shuffled"};
  std::size_t workers = 14, prefetch = 8, batch = 512, chunk_records = 0;
  double seconds = 4;
  std::vector<std::size_t> windows{0};
  bool cold = false, json = false;
  bool no_decode_ahead = false, keep_cache = false;
  std::string target = "cuda";
  std::string decode = "automatic";
  std::size_t device_cache_mib = 0;  // loader_config::device_cache_bytes in MiB (0: automatic)
  std::string numa = "auto";
  bool ranks_from_env = false;
};

// Fraction of `path`'s pages in the page cache (mincore), or -1 when it cannot be told.
double resident_fraction(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return -1;
  const off_t size = ::lseek(fd, 0, SEEK_END);
  double frac = -1;
  if (size > 0) {
    void* m = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
      const long page = ::sysconf(_SC_PAGESIZE);
      std::vector<unsigned char> v(static_cast<std::size_t>((size + page - 1) / page));
      if (::mincore(m, static_cast<std::size_t>(size), v.data()) == 0) {
        std::size_t in = 0;
        for (unsigned char c : v) in += c & 1;
        frac = static_cast<double>(in) / static_cast<double>(v.size());
      }
      ::munmap(m, static_cast<std::size_t>(size));
    }
  }
  ::close(fd);
  return frac;
}

// Drops the files from the page cache; returns the largest resident fraction left (the kernel
// keeps pages other processes have mapped or dirty).
double evict(const std::vector<std::string>& files) {
  double worst = 0;
  for (const auto& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("cannot open " + f);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    worst = std::max(worst, resident_fraction(f));
  }
  return worst;
}

double dd_rate(const std::vector<std::string>& files) {
  std::vector<char> buf(1u << 20);
  double bytes = 0;
  const auto t0 = clock_type::now();
  for (const auto& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("cannot open " + f);
    for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) bytes += static_cast<double>(n);
    ::close(fd);
  }
  return bytes / since(t0) / 1e9;
}

// `threads` threads, thread t reading slice t of the files' bytes (taken as one stream) in 1 MiB
// preads, after an untimed pass that brings them into the page cache: the rate at which the
// host's cores read these files from memory, the bound of a page-cache loader on this host.
double read_rate(const std::vector<std::string>& files, std::size_t threads, double budget) {
  struct span_of_file {
    int fd;
    std::uint64_t first, size;  // offset of the file in the stream, its bytes
  };
  std::vector<span_of_file> f;
  std::uint64_t total = 0;
  for (const auto& path : files) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("cannot open " + path);
    const auto size = static_cast<std::uint64_t>(::lseek(fd, 0, SEEK_END));
    f.push_back({fd, total, size});
    total += size;
  }
  constexpr std::uint64_t block = 1u << 20;
  auto pass = [&] {
    std::vector<double> bytes(threads);
    std::vector<std::thread> pool;
    const auto t0 = clock_type::now();
    for (std::size_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        std::vector<char> buf(block);
        const std::uint64_t lo = total * t / threads, hi = total * (t + 1) / threads;
        for (std::uint64_t at = lo; at < hi && since(t0) < budget;) {
          const auto it = std::upper_bound(f.begin(), f.end(), at,
                                           [](std::uint64_t v, const span_of_file& s) { return v < s.first; }) - 1;
          const std::uint64_t n = std::min({block, hi - at, it->first + it->size - at});
          const ssize_t got = ::pread(it->fd, buf.data(), n, static_cast<off_t>(at - it->first));
          if (got <= 0) break;
          bytes[t] += static_cast<double>(got);
          at += static_cast<std::uint64_t>(got);
        }
      });
    for (auto& th : pool) th.join();
    double sum = 0;
    for (const double b : bytes) sum += b;
    return sum / since(t0) / 1e9;
  };
  pass();
  const double rate = pass();
  for (const auto& s : f) ::close(s.fd);
  return rate;
}

double decode1_rate(const gpufeed::hdf5_source& src, double budget, std::uint64_t& records) {
  src.drop_decoded_chunks();  // decode, do not serve an earlier case's chunks
  std::vector<std::byte> buf(src.max_record_size());
  // An untimed pass first, then forget_decoded_chunks(): the timed pass decodes into buffers the
  // cache holds, as the loader cases' epochs do, not into fresh pages.
  {
    const auto w0 = clock_type::now();
    auto warm = src.make_reader();
    for (std::uint64_t i = 0; i < src.size() && since(w0) < budget; ++i) warm.read(i, buf);
  }
  src.forget_decoded_chunks();
  double bytes = 0;
  records = 0;
  const auto t0 = clock_type::now();
  auto r = src.make_reader();
  for (std::uint64_t i = 0; i < src.size() && since(t0) < budget; ++i) {
    r.read(i, buf);
    bytes += static_cast<double>(src.record_size(i));
    ++records;
  }
  return bytes / since(t0) / 1e9;
}

// `threads` independent single-thread readers, thread t reading its own contiguous slice of the
// records in file order (slices are whole runs of `align` records, spread evenly, so threads
// share no chunk band when bands are aligned to it): what N cores decode on this machine without
// the loader (all-core clock, shared L3 and memory), the honest ceiling for "workers x decode1".
// Timed after an untimed pass, as decode1. The timed interval ends when the first thread
// finishes its slice (the others stop at their next record), so every thread decodes for all of
// it: the rate is all threads' bytes over that interval.
double decode_n_rate(const gpufeed::hdf5_source& src, std::size_t threads, std::size_t align,
                     double budget, std::uint64_t& records) {
  src.drop_decoded_chunks();
  gpufeed::read_plan plan;
  plan.workers = threads;  // room for every thread's band (automatic budgets)
  plan.lookahead_records = threads * align;
  src.plan_reads(plan);
  const std::uint64_t n = src.size();
  const std::uint64_t runs = (n + align - 1) / align;
  auto bound = [&](std::size_t t) { return std::min<std::uint64_t>(n, runs * t / threads * align); };
  std::vector<double> bytes(threads);
  std::vector<std::uint64_t> count(threads);
  auto pass = [&] {
    std::fill(bytes.begin(), bytes.end(), 0.0);
    std::fill(count.begin(), count.end(), 0);
    std::atomic<bool> stop{false};
    std::atomic<double> stopped_at{0.0};
    std::vector<std::thread> pool;
    const auto t0 = clock_type::now();
    for (std::size_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        std::vector<std::byte> buf(src.max_record_size());
        auto r = src.make_reader();
        for (std::uint64_t i = bound(t); i < bound(t + 1); ++i) {
          if (stop.load(std::memory_order_relaxed) || since(t0) >= budget) break;
          r.read(i, buf);
          bytes[t] += static_cast<double>(src.record_size(i));
          ++count[t];
        }
        if (!stop.exchange(true)) stopped_at = since(t0);
      });
    for (auto& th : pool) th.join();
    return stopped_at.load();
  };
  pass();
  src.forget_decoded_chunks();
  const double s = pass();
  records = 0;
  double total = 0;
  for (std::size_t t = 0; t < threads; ++t) {
    records += count[t];
    total += bytes[t];
  }
  return s > 0 ? total / s / 1e9 : 0.0;
}

// Label mix of one batch: distinct labels and Shannon entropy in bits.
struct mix {
  double distinct = 0, entropy = 0;
};
mix label_mix(std::span<const std::int64_t> labels) {
  std::map<std::int64_t, std::size_t> count;
  for (auto l : labels) ++count[l];
  mix m;
  m.distinct = static_cast<double>(count.size());
  for (const auto& [l, c] : count) {
    const double p = static_cast<double>(c) / static_cast<double>(labels.size());
    m.entropy -= p * std::log2(p);
  }
  return m;
}

struct case_result {
  std::string name;
  double gb_per_s = 0, seconds = 0, stall = 0;
  std::uint64_t records = 0, batches = 0;
  bool full_epoch = false;
  double mean_distinct = 0, mean_entropy = 0;  // quality case
  nlohmann::json decode;                       // stats().decode, when the source reports it
  nlohmann::json time;                         // where the workers' time went (loader cases)
  nlohmann::json numa;                         // stats().numa (loader cases)
  nlohmann::json device_decode;                // stats().device_decode (loader cases)
};

// The settings every case shares: one process, the options' batch, workers and prefetch.
gpufeed::loader_config case_config(const options& o, gpufeed::sample_order order,
                                   std::size_t window) {
  gpufeed::loader_config c;
  c.batch_size = o.batch;
  c.order = order;
  c.shuffle_window = window;
  if (!o.ranks_from_env) c.part = gpufeed::partition{};  // else from the launcher's environment
  if (o.numa == "off") {
    c.numa = gpufeed::numa_setting::off();
  } else if (o.numa != "auto") {
    c.numa = gpufeed::numa_setting::on_node(std::stoi(o.numa));
  }
  c.workers = o.workers;
  c.prefetch = o.prefetch;
  c.chunk_records = o.chunk_records;
  c.device_cache_bytes = o.device_cache_mib << 20;
  c.decode = o.decode == "host"     ? gpufeed::decode_site::host
             : o.decode == "device" ? gpufeed::decode_site::device
                                    : gpufeed::decode_site::automatic;
  return c;
}

class runner {
 public:
  runner(const options& o, bench::gpu* g) : o_(o), gpu_(g) {}

  // `whole_epoch`: exactly one epoch of `order` (a first pass); otherwise epochs until --seconds.
  // A source of its own per case: the decoded-chunk cache's budget only grows, and one case's
  // cache must not serve or size the next.
  case_result loader_case(const std::string& name, gpufeed::sample_order order,
                          std::size_t window, bool whole_epoch) {
    const gpufeed::hdf5_source src(o_.files);
    gpufeed::loader_config c = case_config(o_, order, window);
    // A first pass (cold data) is one epoch; otherwise epochs repeat until --seconds, so loader
    // start-up (threads, pinned slots, the first batch) does not dominate a short epoch.
    c.epochs = whole_epoch ? 1 : 0;
    c.decode_ahead = !o_.no_decode_ahead;
    c.target = gpu_ ? gpu_->target() : gpufeed::target::host();
    c.consumer_stream = gpu_ ? gpu_->stream() : nullptr;
    gpufeed::loader<gpufeed::hdf5_source> l(src, c);
    case_result r;
    r.name = name;
    double distinct = 0, entropy = 0;
    const auto t0 = clock_type::now();
    while (auto b = l.next()) {
      if (gpu_) gpu_->model(b->data().data(), b->data().size(), 0.0, gpu_->stream());
      if (b->has_labels()) {
        const mix m = label_mix(b->host_labels());
        distinct += m.distinct;
        entropy += m.entropy;
      }
      ++r.batches;
      r.records += b->size();
      if (b->last_in_epoch()) {
        r.full_epoch = true;
        // Each epoch decodes its chunks: without this, a cache budget that holds much of a
        // small file serves later epochs from the last one, and the rate is no longer a decode
        // rate (decoded-ahead chunks of the next epoch that are not in use go too). Forgotten,
        // not freed: the next epoch decodes into the same buffers, as the cache's evictions do
        // in a long run, instead of faulting in fresh pages.
        if (!o_.keep_cache) src.forget_decoded_chunks();
      }
      if (whole_epoch) continue;
      if (since(t0) > o_.seconds) break;
    }
    if (gpu_) gpu_->synchronize(gpu_->stream());
    const gpufeed::loader_stats s = l.stats();
    r.seconds = since(t0);
    r.gb_per_s = static_cast<double>(s.bytes) / r.seconds / 1e9;
    r.stall = s.stall_fraction();
    if (r.batches) {
      r.mean_distinct = distinct / static_cast<double>(r.batches);
      r.mean_entropy = entropy / static_cast<double>(r.batches);
    }
    r.decode = decode_json(s);
    r.time = time_json(s);
    r.numa = {{"mode", s.numa.mode},           {"node", s.numa.node},
              {"honoured", s.numa.honoured},   {"slot_node", s.numa.slot_node},
              {"worker_node", s.numa.worker_node}, {"reason", s.numa.reason}};
    const gpufeed::device_decode_stats& d = s.device_decode;
    r.device_decode = {{"on", d.on},
                       {"units", d.device.units},
                       {"launches", d.device.launches},
                       {"compressed_bytes", d.device.compressed_bytes},
                       {"gathered_bytes", d.device.gathered_bytes},
                       {"host_bytes", d.device.host_bytes},
                       {"decode_seconds", d.device.decode_seconds},
                       {"timed_batches", d.device.timed_batches},
                       {"units_staged", d.units_staged},
                       {"units_staged_ahead", d.units_staged_ahead},
                       {"stage_ahead", d.stage_ahead},
                       {"no_room", d.no_room},
                       {"batches_redone", d.batches_redone},
                       {"cache_places", d.cache_places},
                       {"peak_places", d.peak_places},
                       {"place_bytes", d.place_bytes}};
    return r;
  }

 private:
  // The workers' seconds summed over workers, beside elapsed x workers: reading (wall), of which
  // on a CPU, waiting for a core, and idle (nothing to do: the pipeline ahead was full); with the
  // planner's and the consumer's waits. Where block_shuffled loses against sequential shows here.
  static nlohmann::json time_json(const gpufeed::loader_stats& s) {
    double read = 0, cpu = 0, runq = 0, idle = 0;
    for (const auto& w : s.workers) {
      read += w.read_seconds;
      cpu += w.read_cpu_seconds;
      runq += w.runqueue_seconds;
      idle += w.idle_seconds;
    }
    return {{"worker_seconds", s.elapsed_seconds * static_cast<double>(s.workers.size())},
            {"read", read}, {"cpu", cpu}, {"runqueue", runq}, {"idle", idle},
            {"planner_wait", s.planner_wait_seconds}, {"consumer_wait", s.consumer_wait_seconds},
            {"cache_waits", s.decode ? s.decode->cache_waits : 0},
            {"cache_wait_seconds", s.decode ? s.decode->cache_wait_seconds : 0.0},
            {"cache_lock_wait_seconds", s.decode ? s.decode->cache_lock_wait_seconds : 0.0}};
  }

  static nlohmann::json decode_json(const gpufeed::loader_stats& s) {
    if (!s.decode) return nlohmann::json::object();
    const gpufeed::decode_stats& d = *s.decode;
    return {{"chunks_decoded", d.chunks_decoded},
            {"decoded_bytes", d.decoded_bytes},
            {"delivered_bytes", d.delivered_bytes},
            {"amplification", d.amplification()},
            {"cache_hits", d.cache_hits},
            {"uncached_decodes", d.uncached_decodes},
            {"decoded_ahead", d.decoded_ahead},
            {"cache_peak_bytes", d.cache_peak_bytes},
            {"cache_budget_bytes", d.cache_budget_bytes},
            {"shuffle_window", s.shuffle_window},
            {"order_units", s.order_units}};
  }

  const options& o_;
  bench::gpu* gpu_;
};

// The label mix of every batch of epoch 0 in the order a loader with these settings uses.
case_result quality_case(const gpufeed::hdf5_source& src, const options& o,
                         gpufeed::sample_order order, std::size_t window) {
  const gpufeed::loader_config c = case_config(o, order, window);
  const auto setup = loading::resolve_config<gpufeed::default_options>(src, c);
  const gpufeed::sampler& s = setup.order;
  case_result r;
  const bool block = order == gpufeed::sample_order::block_shuffled;
  r.name = block ? "quality/block/w" + std::to_string(s.window()) : "quality/shuffled";
  std::vector<std::uint64_t> idx(o.batch);
  std::vector<std::int64_t> labels(o.batch);
  double distinct = 0, entropy = 0;
  const auto t0 = clock_type::now();
  for (auto st = s.first_state(); st.epoch == 0; st = s.advance(st)) {
    const std::size_t n = s.batch(st, idx);
    for (std::size_t k = 0; k < n; ++k) labels[k] = src.label(idx[k]);
    const mix m = label_mix(std::span(labels).first(n));
    distinct += m.distinct;
    entropy += m.entropy;
    ++r.batches;
    r.records += n;
  }
  r.seconds = since(t0);
  r.full_epoch = true;
  r.mean_distinct = distinct / static_cast<double>(r.batches);
  r.mean_entropy = entropy / static_cast<double>(r.batches);
  if (block) {
    const auto& u = s.units();
    const double unit_records = static_cast<double>(u.records()) / static_cast<double>(u.size());
    r.decode = {{"units", u.size()},
                {"window_units", s.window()},
                {"mean_unit_records", unit_records},
                {"window_decoded_bytes",
                 static_cast<double>(s.window()) * unit_records *
                     static_cast<double>(src.max_record_size())}};
  }
  return r;
}

nlohmann::json to_json(const case_result& r) {
  return {{"case", r.name},          {"gb_per_s", r.gb_per_s}, {"seconds", r.seconds},
          {"records", r.records},    {"batches", r.batches},   {"stall", r.stall},
          {"full_epoch", r.full_epoch}, {"mean_distinct_labels", r.mean_distinct},
          {"mean_label_entropy_bits", r.mean_entropy}, {"decode", r.decode},
          {"time", r.time}, {"numa", r.numa}, {"device_decode", r.device_decode}};
}

bool wants(const options& o, const char* c) {
  return std::find(o.cases.begin(), o.cases.end(), c) != o.cases.end();
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"compressed_bench: the loader on compressed and cold HDF5 data, per order"};
  app.add_option("files", o.files, "HDF5 files (dataset \"data\")")->required();
  app.add_option("--cases", o.cases)->delimiter(',');
  app.add_option("--workers", o.workers);
  app.add_option("--prefetch", o.prefetch);
  app.add_option("--chunk-records", o.chunk_records, "loader_config::chunk_records (0: automatic)");
  app.add_option("--batch", o.batch);
  app.add_option("--seconds", o.seconds);
  app.add_option("--windows", o.windows)->delimiter(',');
  app.add_flag("--cold", o.cold);
  app.add_flag("--no-decode-ahead", o.no_decode_ahead, "loader_config::decode_ahead = false");
  app.add_option("--decode", o.decode, "loader_config::decode: automatic, host or device")
      ->check(CLI::IsMember({"automatic", "host", "device"}));
  app.add_option("--device-cache-mib", o.device_cache_mib,
                 "loader_config::device_cache_bytes in MiB (0: automatic); smaller than the data, "
                 "every epoch decodes again, as a long run over more data than the cache does");
  app.add_flag("--keep-cache", o.keep_cache,
               "keep decoded chunks across epochs (by default each epoch decodes its own)");
  app.add_flag("--json", o.json);
  app.add_option("--target", o.target)->check(CLI::IsMember({"cuda", "host"}));
  app.add_option("--numa", o.numa, "loader_config::numa: auto, off or a node number")
      ->check([](const std::string& v) {
        if (v == "auto" || v == "off") return std::string();
        return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos
                   ? std::string()
                   : std::string("auto, off or a node number");
      });
  app.add_flag("--ranks-from-env", o.ranks_from_env,
               "rank and world size from the launcher's environment");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return e.get_exit_code() == 0 ? 0 : 2;
  }
  FILE* log = o.json ? stderr : stdout;
  std::unique_ptr<bench::gpu> g;
  if (o.target == "cuda") {
    std::string why;
    g = bench::open_gpu(0, why);
    if (!g) std::fprintf(log, "no GPU (%s): host target\n", why.c_str());
  }
  nlohmann::json out = nlohmann::json::array();
  auto report = [&](const case_result& r) {
    std::fprintf(log, "%-28s %8.3f GB/s  %8llu records in %6.2f s%s  stall %.2f",
                 r.name.c_str(), r.gb_per_s, static_cast<unsigned long long>(r.records), r.seconds,
                 r.full_epoch ? " (epoch)" : "", r.stall);
    if (r.mean_distinct > 0)
      std::fprintf(log, "  labels/batch %.1f, entropy %.2f bits", r.mean_distinct, r.mean_entropy);
    if (!r.decode.empty()) std::fprintf(log, "  decode %s", r.decode.dump().c_str());
    if (!r.time.empty()) std::fprintf(log, "  time %s", r.time.dump().c_str());
    if (r.device_decode.is_object() && r.device_decode.value("on", false))
      std::fprintf(log, "  device_decode %s", r.device_decode.dump().c_str());
    std::fprintf(log, "\n");
    std::fflush(log);
    out.push_back(to_json(r));
  };
  try {
    gpufeed::hdf5_source src(o.files);
    const auto& info = src.shards()[0];
    std::string filters;
    for (const auto& f : info.filters) filters += (filters.empty() ? "" : "+") + f;
    std::fprintf(log, "%llu records of %zu bytes in %zu file(s); %s, chunks %s; read path %s\n",
                 static_cast<unsigned long long>(src.size()), src.max_record_size(),
                 o.files.size(), filters.empty() ? "no filters" : filters.c_str(),
                 info.storage.c_str(), to_string(info.read_path).c_str());
    runner run(o, g.get());
    auto prepare = [&] {
      if (!o.cold) return;
      const double left = evict(o.files);
      if (left > 0.05)
        std::fprintf(log, "warning: %.0f %% of the files stayed in the page cache\n", 100 * left);
    };
    if (o.cold) {
      prepare();
      case_result r;
      r.name = "dd";
      r.gb_per_s = dd_rate(o.files);
      report(r);
    }
    if (wants(o, "read")) {
      case_result r;
      r.name = "read";
      const auto t0 = clock_type::now();
      r.gb_per_s = read_rate(o.files, o.workers, o.seconds);
      r.seconds = since(t0);
      report(r);
    }
    if (wants(o, "h2d")) {
      if (!g) throw std::runtime_error("the h2d case needs a GPU");
      case_result r;
      r.name = "h2d";
      const auto t0 = clock_type::now();
      r.gb_per_s = g->pinned_h2d_gbps(std::size_t{16} << 20, 64);
      r.seconds = since(t0);
      report(r);
    }
    if (wants(o, "decode1")) {
      prepare();
      case_result r;
      r.name = "decode1";
      const auto t0 = clock_type::now();
      r.gb_per_s = decode1_rate(src, o.seconds, r.records);
      r.seconds = since(t0);
      report(r);
    }
    if (wants(o, "decodeN")) {
      prepare();
      case_result r;
      r.name = "decode" + std::to_string(o.workers);
      const auto t0 = clock_type::now();
      r.gb_per_s = decode_n_rate(src, o.workers, o.batch, o.seconds, r.records);
      r.seconds = since(t0);
      report(r);
    }
    using gpufeed::sample_order;
    if (wants(o, "sequential")) {
      prepare();
      report(run.loader_case("sequential", sample_order::sequential, 0, o.cold));
    }
    if (wants(o, "block")) {
      for (std::size_t w : o.windows) {
        prepare();
        report(run.loader_case(w ? "block/w" + std::to_string(w) : "block",
                               sample_order::block_shuffled, w, o.cold));
      }
    }
    if (wants(o, "shuffled")) {
      prepare();
      report(run.loader_case("shuffled", sample_order::shuffled, 0, o.cold));
    }
    if (wants(o, "quality")) {
      if (!src.has_labels()) throw std::runtime_error("the quality case needs labels");
      for (std::size_t w : o.windows) report(quality_case(src, o, sample_order::block_shuffled, w));
      report(quality_case(src, o, sample_order::shuffled, 0));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compressed_bench: %s\n", e.what());
    return 1;
  }
  if (o.json) std::printf("%s\n", out.dump(1).c_str());
  return 0;
}
