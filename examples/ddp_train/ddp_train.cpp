// ddp_train: data-parallel training fed by gpufeed, one process per GPU.
//
//   mpirun -np 4 ddp_train [--data DIR] [--records N] [--features D] [--hidden H] [--epochs E]
//                          [--global-batch G] [--lr R] [--target auto|host|cuda] [--check] ...
//   ddp_train ...            (one process: an MPI singleton, or no MPI at all where none loads)
//
// 1. MPI gives rank, world size and local rank (comm.hpp); the loader's partition is {rank,
//    world} and the device is cuda:<local rank>.
// 2. Rank 0 packs a synthetic labelled dataset (dataset.hpp) unless DIR holds it; the others
//    wait, then every rank opens the shards with hdf5_source.
// 3. Each rank trains a two-layer MLP (model.hpp) on its share of every global batch G (local
//    batch G / world): on a device target cuBLAS + kernels on the loader's consumer stream and
//    ncclAllReduce of the gradients on that stream; on the host the same math on the CPU and the
//    gradients summed over MPI in rank order.
// 4. Per epoch rank 0 prints the mean loss over all ranks' samples, samples/s per rank (min and
//    max) and in total. --check asserts (checks.hpp) equal batch counts, the epoch's union of
//    records, and bitwise identical parameters at the end; the exit status is 1 if any fails.
// 5. --steps K stops after K steps and --checkpoint F saves the loader's state (one global
//    position, the same on every rank), the parameters and, for --check, the records delivered
//    so far this epoch (checkpoint.hpp); --resume F continues at any world size with the same
//    global batch. --fault overlap|diverge breaks what --check checks (CI shows it fails).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "checks.hpp"
#include "comm.hpp"
#include "dataset.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/target_choice.hpp"
#include "model.hpp"

namespace {

struct options {
  std::string data = "ddp-demo";
  ddp::dataset_spec spec;
  std::size_t hidden = 32;
  std::uint64_t epochs = 3;
  std::size_t global_batch = 48;
  float lr = 0.5f;
  std::uint64_t seed = 1;
  std::string target = "auto";
  std::string comm = "auto";
  std::size_t workers = 2;
  bool check = false;
  std::string loss_log;
  std::uint64_t steps = 0;       // stop after this many steps (0: run the epochs)
  std::string checkpoint_file;   // written when --steps stops the run
  std::string resume_file;
  std::string fault;             // tests only: break what --check checks
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// host, or cuda:<local rank> (auto: when this build has the device model and the device is
// usable; cuda: or an error saying why not).
gpufeed::target pick_target(const options& o, const ddp::comm& c) {
  if (o.target == "host") return gpufeed::target::host();
  std::string why = "this ddp_train was built without the device model (nvcc, NCCL, cuBLAS)";
  if (ddp::device_model_built()) {
    auto t = gpufeed::device_or_host(c.local_rank(), &why);
    if (!t.is_host()) return t;
  }
  if (o.target == "cuda") throw gpufeed::config_error("--target cuda: " + why);
  if (c.rank() == 0) std::printf("ddp_train: host target: %s\n", why.c_str());
  return gpufeed::target::host();
}

int run(ddp::comm& c, const options& o) {
  const bool root = c.rank() == 0;
  const auto world = static_cast<std::size_t>(c.world());
  if (o.global_batch % world != 0)
    throw gpufeed::config_error("--global-batch " + std::to_string(o.global_batch) +
                                " does not split over " + std::to_string(world) + " ranks");
  std::vector<std::filesystem::path> shards;
  if (root) shards = ddp::prepare_dataset(o.data, o.spec);
  c.barrier();
  if (!root) shards = ddp::prepare_dataset(o.data, o.spec);
  const gpufeed::hdf5_source src(shards);

  ddp::train_settings ts;
  ts.shape = {o.spec.features, o.hidden, o.spec.classes};
  ts.learning_rate = o.lr;
  ts.local_batch = o.global_batch / world;
  ts.global_batch = o.global_batch;
  ts.seed = o.seed;
  const gpufeed::target where = pick_target(o, c);
  auto model = where.is_host() ? ddp::make_host_model(ts, c)
                               : ddp::make_device_model(ts, c, where.device());

  ddp::checkpoint resumed;
  if (!o.resume_file.empty()) {
    resumed = ddp::read_checkpoint(o.resume_file);
    if (resumed.records != src.size() || resumed.parameters.size() != ts.shape.parameters())
      throw gpufeed::config_error(o.resume_file + " is a checkpoint of another dataset or model");
    model->set_parameters(resumed.parameters);
  }
  gpufeed::loader_config lc;
  lc.batch_size = ts.local_batch;
  lc.target = where;
  lc.seed = o.seed;
  lc.part = gpufeed::partition{static_cast<std::uint32_t>(c.rank()),
                               static_cast<std::uint32_t>(world)};
  if (o.fault == "overlap") lc.part->rank = 0;  // every rank reads rank 0's share
  lc.epochs = o.epochs;
  lc.workers = o.workers;
  lc.consumer_stream = model->stream();
  if (!o.resume_file.empty()) lc.resume = resumed.state;
  gpufeed::loader<gpufeed::hdf5_source, gpufeed::loader_options<gpufeed::dynamic, 8, 2>> feed(src, lc);
  const std::uint64_t records = src.size();
  if (root)
    std::printf("ddp_train: %zu ranks over %s; %llu records of %zu features, %zu classes; "
                "global batch %zu (%zu per rank), %llu batches per rank per epoch; %s on %s\n",
                world, c.describe().c_str(), static_cast<unsigned long long>(records),
                o.spec.features, o.spec.classes, o.global_batch, ts.local_batch,
                static_cast<unsigned long long>(feed.batches_per_epoch()),
                model->describe().c_str(), where.name().c_str());
  std::FILE* loss_log = root && !o.loss_log.empty() ? std::fopen(o.loss_log.c_str(), "w") : nullptr;
  if (root && !o.loss_log.empty() && !loss_log)
    throw gpufeed::io_error("cannot write " + o.loss_log);
  if (root)
    std::printf("%6s %12s %14s %14s %14s\n", "epoch", "loss", "rank min/s", "rank max/s",
                "total samples/s");
  // Exactly once per epoch when the epoch's sequence splits into whole batches on every rank.
  const bool exact = records % (ts.local_batch * world) == 0;
  bool ok = true;
  std::vector<std::uint64_t> seen, earlier = resumed.delivered;
  const auto& [resumed_seed, first_epoch, resumed_at] = resumed.state;
  std::uint64_t steps = resumed.steps, run_steps = 0;
  bool stopped = false;
  double run_seconds = 0, run_samples = 0;
  for (std::uint64_t e = first_epoch; e < o.epochs && !stopped; ++e) {
    seen.clear();
    std::uint64_t batches = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& b : feed.epoch()) {
      model->step(b);
      ++batches;
      ++steps;
      // Kept without --check too: a checkpoint carries them (8 bytes a record).
      seen.insert(seen.end(), b.host_indices().begin(), b.host_indices().end());
      if (o.steps && ++run_steps == o.steps) {
        stopped = true;
        break;
      }
    }
    const ddp::loss_sum l = model->take_loss();  // waits for the epoch's queued steps
    const double secs = seconds_since(t0);
    run_seconds += secs;
    run_samples += static_cast<double>(l.samples);
    double mine[3] = {l.loss, static_cast<double>(l.samples), static_cast<double>(l.samples) / secs};
    const auto all = ddp::all_gather_values(c, std::span<const double>(mine, 3));
    double loss = 0, samples = 0, lo = 1e300, hi = 0, total = 0;
    for (const auto& r : all) {
      loss += r[0];
      samples += r[1];
      lo = std::min(lo, r[2]);
      hi = std::max(hi, r[2]);
      total += r[2];
    }
    // A part of an epoch (stopped by --steps, or resumed in the middle) is marked: its loss is
    // not comparable with a whole epoch's.
    const bool part = stopped || (e == first_epoch && resumed_at != 0);
    if (root) {
      std::printf("%5llu%s %12.6f %14.0f %14.0f %14.0f\n", static_cast<unsigned long long>(e),
                  part ? "*" : " ", loss / samples, lo, hi, total);
      if (loss_log)
        std::fprintf(loss_log, "%s%llu %.9e\n", part ? "# part of epoch " : "",
                     static_cast<unsigned long long>(e), loss / samples);
    }
    if (o.check && !stopped) {
      std::string report;
      ok = ddp::check_epoch(c, e, records, batches, seen, earlier, exact, &report) && ok;
      if (root) std::printf("check: %s\n", report.c_str());
    }
    earlier.clear();
    std::fflush(stdout);
  }
  if (loss_log) std::fclose(loss_log);
  const double rate = run_seconds > 0 ? run_samples / run_seconds : 0;
  const auto rates = ddp::all_gather_values(c, std::span<const double>(&rate, 1));
  if (root) {
    double total = 0;
    std::printf("samples/s over the run:");
    for (std::size_t r = 0; r < rates.size(); ++r) {
      std::printf("%s rank %zu %.0f", r ? "," : "", r, rates[r][0]);
      total += rates[r][0];
    }
    std::printf("; total %.0f\n", total);
  }
  if (stopped && !o.checkpoint_file.empty()) {
    ddp::checkpoint cp;
    cp.state = feed.state();
    cp.records = records;
    cp.steps = steps;
    cp.parameters = model->parameters();
    cp.delivered = resumed.delivered;  // a resumed run stopped again in the same epoch
    const auto& [cp_seed, cp_epoch, cp_at] = cp.state;
    if (cp_epoch != first_epoch || cp_at == 0) cp.delivered.clear();
    for (const auto& r : ddp::all_gather_values(c, std::span<const std::uint64_t>(seen)))
      if (cp_at != 0) cp.delivered.insert(cp.delivered.end(), r.begin(), r.end());
    if (root) {
      ddp::write_checkpoint(o.checkpoint_file, cp);
      std::printf("checkpoint after %llu steps (epoch %llu, position %llu) written to %s\n",
                  static_cast<unsigned long long>(steps), static_cast<unsigned long long>(cp_epoch),
                  static_cast<unsigned long long>(cp_at), o.checkpoint_file.c_str());
    }
    c.barrier();  // the file is whole before any rank goes on (or a resume reads it)
  }
  if (o.check) {
    std::string report;
    auto p = model->parameters();
    if (o.fault == "diverge" && c.rank() == c.world() - 1) p[0] = std::nextafter(p[0], 1e30f);
    ok = ddp::check_identical_parameters(c, p, &report) && ok;
    if (root) std::printf("check: %s\n%s\n", report.c_str(), ok ? "checks passed" : "CHECKS FAILED");
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"ddp_train: data-parallel training fed by gpufeed (MPI + NCCL + cuBLAS)"};
  app.add_option("--data", o.data, "dataset directory (packed on first use)");
  app.add_option("--records", o.spec.records, "records in the synthetic dataset");
  app.add_option("--features", o.spec.features, "float32 features per record");
  app.add_option("--classes", o.spec.classes, "classes");
  app.add_option("--hidden", o.hidden, "hidden units");
  app.add_option("--epochs", o.epochs, "epochs");
  app.add_option("--global-batch", o.global_batch, "records per step over all ranks");
  app.add_option("--lr", o.lr, "SGD learning rate");
  app.add_option("--seed", o.seed, "shuffle and initial-weight seed");
  app.add_option("--target", o.target, "auto (cuda:<local rank> when built with CUDA), host, cuda")
      ->check(CLI::IsMember({"auto", "host", "cuda"}));
  app.add_option("--comm", o.comm, "auto, mpi (required) or self (no MPI: one process)")
      ->check(CLI::IsMember({"auto", "mpi", "self"}));
  app.add_option("--workers", o.workers, "loader worker threads per rank");
  app.add_flag("--check", o.check, "assert batch counts, epoch coverage, identical weights");
  app.add_option("--loss-log", o.loss_log, "rank 0 writes 'epoch loss' lines here");
  app.add_option("--steps", o.steps, "stop after this many steps (then --checkpoint)");
  app.add_option("--checkpoint", o.checkpoint_file, "write a checkpoint here when --steps stops");
  app.add_option("--resume", o.resume_file, "resume from this checkpoint (any world size)");
  app.add_option("--fault", o.fault, "tests: overlap (ranks share a partition) or diverge "
                                     "(the last rank's weights differ by one ulp)")
      ->check(CLI::IsMember({"", "overlap", "diverge"}));
  CLI11_PARSE(app, argc, argv);
  std::unique_ptr<ddp::comm> c;
  try {
    std::string why;
    const auto kind = o.comm == "mpi" ? ddp::comm_kind::mpi
                      : o.comm == "self" ? ddp::comm_kind::self : ddp::comm_kind::automatic;
    c = ddp::open_comm(kind, &argc, &argv, &why);
    if (c->rank() == 0) std::printf("ddp_train: %s\n", why.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_train: %s\n", e.what());
    return 1;
  }
  try {
    return run(*c, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_train rank %d: %s\n", c->rank(), e.what());
    std::fflush(stderr);
    if (c->world() > 1) c->abort(1);
    return 1;
  }
}
