// train_loop: gpufeed's main job — a training loop fed by the overlapped loader.
//
//   train_loop [--data DIR] [--format hdf5|lmdb] [--records N] [--record-kib K] [--epochs E]
//              [--batch B] [--workers W] [--step-us U] [--target auto|host|cuda:N] [--trace FILE]
//              [--images DIR [--crop S]]
//
// 1. If DIR holds no packed dataset, writes a demo dataset of N small files (K KiB each, ten
//    label classes as subdirectories) and packs it into shards with gpufeed::pack.
// 2. Streams the shards through loader<Source, loader_options<dynamic, 8, 2>> to the GPU (or the
//    host where there is none) for E epochs. The "model" is a kernel on the consumer stream that
//    reads every byte of the batch (a checksum) and then spins for U microseconds, standing in
//    for a training step; on the host target the checksum runs on the CPU.
// With --images DIR (class folders of JPEG/PNG files, e.g. bench/photos' photo set), the files
// are packed as they are (labels from the folders) instead of the demo data, and each record is
// decoded + RandomResizedCrop(S) + flipped in the loader's workers
// (image::random_resized_crop_transform) to S x S x 3 uint8, then normalised on the GPU to float
// (cuda::normalizer, ImageNet mean/std) before the model step reads it.
// 3. Prints per epoch: samples/s, GB/s, stall % (time the step waited for data) and pinned bytes,
//    then the loader's bottleneck verdict.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <thread>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/image/record_transforms.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/pack/pack.hpp"
#include "gpufeed/verdict.hpp"
#include "train_step.hpp"

namespace fs = std::filesystem;

namespace {

struct options {
  fs::path data = "gpufeed-demo";
  std::string format = "hdf5";
  std::size_t records = 20000;
  std::size_t record_kib = 16;
  std::uint64_t epochs = 3;
  std::size_t batch = 512;  // 8 MiB of 16 KiB records: H2D copies under ~8 MiB lose bandwidth
  std::size_t workers = 0;
  double step_us = 0;
  std::string target = "auto";
  std::string trace;
  std::string order = "shuffled";
  std::size_t window = 0;
  fs::path images;  // --images: a directory of photos instead of the demo data
  int crop = 224;
};

// The demo files: deterministic contents, ten label classes as subdirectories.
void write_demo(const options& o, const fs::path& raw) {
  std::mt19937_64 rng(12345);
  std::vector<char> buf(o.record_kib * 1024);
  for (std::size_t i = 0; i < o.records; ++i) {
    const fs::path dir = raw / ("class" + std::to_string(i % 10));
    fs::create_directories(dir);
    for (auto& c : buf) c = static_cast<char>(rng());
    char name[32];
    std::snprintf(name, sizeof name, "%08zu.bin", i);
    std::ofstream(dir / name, std::ios::binary).write(buf.data(), static_cast<std::streamsize>(buf.size()));
  }
}

// Writes the demo files (or takes --images) and packs them; returns the shard paths.
std::vector<fs::path> prepare(const options& o) {
  const fs::path shards = o.data / ((o.images.empty() ? "shards-" : "shards-images-") + o.format);
  if (fs::exists(shards / "manifest.json")) {  // packed by an earlier run
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(shards)) {
      const std::string name = e.path().filename().string();
      if (name != "manifest.json" && name[0] != '.') out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    std::printf("using the dataset packed in %s (%zu shards)\n", shards.c_str(), out.size());
    return out;
  }
  const fs::path raw = o.images.empty() ? o.data / "raw" : o.images;
  if (!o.images.empty()) {
    std::printf("packing the images under %s as they are\n", raw.c_str());
  } else {
    std::printf("writing %zu demo files of %zu KiB under %s\n", o.records, o.record_kib,
                raw.c_str());
    write_demo(o, raw);
  }
  std::fflush(stdout);
  gpufeed::pack_options po;
  po.format = o.format == "lmdb" ? gpufeed::shard_format::lmdb : gpufeed::shard_format::hdf5;
  po.lmdb_datum = po.format == gpufeed::shard_format::lmdb;  // raw LMDB values hold no label
  po.shard_bytes = 256ull << 20;
  po.label_names = gpufeed::directory_labels(raw);
  po.progress = [](const gpufeed::pack_progress& p) {
    std::fprintf(stderr, "\rpacking: %llu/%llu files, %.0f MB/s, ETA %.0f s   ",
                 static_cast<unsigned long long>(p.files_done),
                 static_cast<unsigned long long>(p.files_total), p.bytes_per_second / 1e6,
                 p.eta_seconds);
  };
  const auto result = gpufeed::pack(gpufeed::list_directory(raw, true), shards, po);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::printf("packed %llu records into %zu %s shards in %.1f s\n",
              static_cast<unsigned long long>(result.records), result.shards.size(),
              o.format.c_str(), result.seconds);
  if (o.images.empty()) fs::remove_all(raw);  // the demo files only, never the user's images
  return result.shards;
}

gpufeed::target pick_target(const std::string& t) {
  if (t == "host") return gpufeed::target::host();
  if (t.rfind("cuda:", 0) == 0) return gpufeed::train::device_target(std::stoi(t.substr(5)));
  std::string why;
  auto tgt = gpufeed::train::device_or_host(&why);
  if (tgt.is_host()) std::printf("no GPU, using the host target: %s\n", why.c_str());
  return tgt;
}

template <class Source>
int train(const Source& src, const options& o) {
  gpufeed::loader_config c;
  c.batch_size = o.batch;
  c.target = pick_target(o.target);
  c.workers = o.workers;
  c.epochs = o.epochs;
  c.order = o.order == "sequential"       ? gpufeed::sample_order::sequential
            : o.order == "block_shuffled" ? gpufeed::sample_order::block_shuffled
                                          : gpufeed::sample_order::shuffled;
  c.shuffle_window = o.window;
  c.trace_events = o.trace.empty() ? 0 : 200000;
  if (!o.images.empty()) {
    c.per_record = gpufeed::image::random_resized_crop_transform({.size = o.crop});
    const std::size_t crop_bytes = static_cast<std::size_t>(o.crop) * o.crop * 3;
    if (gpufeed::train::add_image_normalize(c, crop_bytes))
      std::printf("images: decode + RandomResizedCrop(%d) + flip in the workers, normalised to "
                  "float on the GPU\n", o.crop);
    else
      std::printf("images: decode + RandomResizedCrop(%d) + flip in the workers (host target: no "
                  "GPU normalisation)\n", o.crop);
  }
  gpufeed::train::step model(c.target, o.step_us);
  c.consumer_stream = model.stream();
  gpufeed::loader<Source, gpufeed::loader_options<gpufeed::dynamic, 8, 2>> feed(src, c);
  std::printf("%zu records (%zu bytes each max), batch %zu, %llu batches/epoch, target %s, "
              "order %s\n",
              static_cast<std::size_t>(src.size()), src.max_record_size(), o.batch,
              static_cast<unsigned long long>(feed.batches_per_epoch()), c.target.name().c_str(),
              o.order.c_str());
  const bool device = !c.target.is_host();
  std::printf("%6s %12s %9s %8s %16s\n", "epoch", "samples/s", "GB/s", "stall%",
              device ? "pinned bytes" : "host slot bytes");
  gpufeed::loader_stats before = feed.stats();
  for (std::uint64_t e = 0; e < o.epochs; ++e) {
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& b : feed.epoch()) model(b);
    model.finish();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto now = feed.stats();
    const double records = static_cast<double>(now.records - before.records);
    const double bytes = static_cast<double>(now.bytes - before.bytes);
    // The consumer's stall: on a device target its stream's, measured on the device.
    const bool gpu = now.transfer.timed_batches > 0;
    const double wait = gpu ? now.transfer.consumer_wait_seconds - before.transfer.consumer_wait_seconds
                            : now.consumer_wait_seconds - before.consumer_wait_seconds;
    const double hold = gpu ? now.transfer.consumer_busy_seconds - before.transfer.consumer_busy_seconds
                            : now.consumer_hold_seconds - before.consumer_hold_seconds;
    std::printf("%6llu %12.0f %9.2f %7.1f%% %16zu\n", static_cast<unsigned long long>(e),
                records / secs, bytes / secs / 1e9, wait + hold > 0 ? 100 * wait / (wait + hold) : 0.0,
                now.pinned_bytes + now.host_slot_bytes);
    before = now;
  }
  std::printf("checksum of every byte delivered: %016llx\n",
              static_cast<unsigned long long>(model.checksum()));
  std::printf("\n%s", gpufeed::diagnose(feed.stats(), std::thread::hardware_concurrency()).report().c_str());
  if (!o.trace.empty()) {
    std::ofstream out(o.trace);
    feed.write_trace(out);
    std::printf("timeline written to %s (open in https://ui.perfetto.dev)\n", o.trace.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"train_loop: a training loop fed by gpufeed's overlapped loader"};
  app.add_option("--data", o.data, "dataset directory (packed on first use)");
  app.add_option("--format", o.format, "shard format")->check(CLI::IsMember({"hdf5", "lmdb"}));
  app.add_option("--records", o.records, "demo records to generate");
  app.add_option("--record-kib", o.record_kib, "demo record size in KiB");
  app.add_option("--epochs", o.epochs, "epochs to run");
  app.add_option("--batch", o.batch, "batch size");
  app.add_option("--workers", o.workers, "worker threads (0 = hardware threads)");
  app.add_option("--step-us", o.step_us, "simulated model step per batch, microseconds");
  app.add_option("--target", o.target, "auto, host or cuda:N");
  app.add_option("--trace", o.trace, "write a Chrome-trace timeline here");
  app.add_option("--order", o.order, "epoch order")
      ->check(CLI::IsMember({"shuffled", "block_shuffled", "sequential"}));
  app.add_option("--window", o.window, "block_shuffled: units shuffled together (0 = default)");
  app.add_option("--images", o.images, "train on this directory of photos (class folders)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--crop", o.crop, "--images: crop size")->check(CLI::Range(8, 4096));
  CLI11_PARSE(app, argc, argv);
  try {
    const auto shards = prepare(o);
    if (o.format == "lmdb") {
      gpufeed::lmdb_options lo;
      lo.format = gpufeed::lmdb_options::value_format::datum;
      return train(gpufeed::lmdb_source(shards, lo), o);
    }
    gpufeed::hdf5_options ho;
    ho.label_dataset = "labels";
    return train(gpufeed::hdf5_source(shards, ho), o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_loop: %s\n", e.what());
    return 1;
  }
}
