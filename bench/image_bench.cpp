// image_bench: images/s of JPEG decode + RandomResizedCrop(224) + RandomHorizontalFlip, on one
// photo set, measured three ways in one run (the targets: bench/README.md):
//   crop/threads=1       train_crop on one thread over the files in memory: the single-thread rate
//   crop/threads=W       the same on W plain threads (what the function scales to, no loader)
//   loader/workers=W     pack -> hdf5_source -> loader with random_resized_crop_transform in W
//                        workers -> the device target (H2D into device slots; host without a GPU)
// and, with --peer (bench/peers/pytorch_images.py's JSON), PyTorch DataLoader + torchvision at the
// same worker counts. Targets per W: loader >= 0.8 x W x crop/threads=1; loader >= 2 x PyTorch.
//
//   image_bench --photos DIR [--shards DIR] [--workers 1,4,8,16] [--seconds 3] [--size 224]
//               [--batch 256] [--target auto|host] [--peer torch.json] [--json]
// Progress and a table on stderr; --json prints one JSON array on stdout. Exit 0 whatever the
// figures: the targets are reported (pass true/false), not enforced.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/image/record_transforms.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/pack/pack.hpp"
#include "gpufeed/target_choice.hpp"

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
  fs::path photos, shards;
  std::vector<std::size_t> workers{1, 4, 8, 16};
  double seconds = 3;
  int size = 224;
  std::size_t batch = 256;
  std::string target = "auto", peer;
  bool json_out = false;
};

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::vector<std::vector<std::byte>> load_files(const std::vector<gpufeed::pack_input>& in) {
  std::vector<std::vector<std::byte>> out;
  for (const auto& f : in) {
    std::ifstream s(f.path, std::ios::binary);
    std::vector<char> c((std::istreambuf_iterator<char>(s)), std::istreambuf_iterator<char>());
    std::vector<std::byte> b(c.size());
    std::transform(c.begin(), c.end(), b.begin(), [](char x) { return static_cast<std::byte>(x); });
    out.push_back(std::move(b));
  }
  return out;
}

// train_crop on `threads` plain threads over the files (each thread its own cropper), for
// `seconds`: images/s.
double crop_rate(const std::vector<std::vector<std::byte>>& files, std::size_t threads,
                 const gpufeed::image::train_crop_options& o, double seconds) {
  std::atomic<std::uint64_t> done{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  const auto t0 = clock_type::now();
  for (std::size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      gpufeed::image::train_crop crop(o);
      std::vector<std::byte> out(crop.output_bytes());
      std::uint64_t n = 0;
      for (std::uint64_t i = t * 7919; !stop.load(std::memory_order_relaxed); ++i, ++n) {
        gpufeed::record_rng rng(1, 0, i);
        crop(files[i % files.size()], rng, out);
      }
      done += n;
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : pool) t.join();
  return static_cast<double>(done.load()) / since(t0);
}

std::vector<fs::path> packed(const options& o, const std::vector<gpufeed::pack_input>& inputs) {
  if (fs::exists(o.shards / "manifest.json")) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(o.shards))
      if (e.path().extension() == ".h5") out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }
  gpufeed::pack_options po;
  po.label_names = gpufeed::directory_labels(o.photos);
  po.force = true;
  return gpufeed::pack(inputs, o.shards, po).shards;
}

// The loader with the image transform in `workers` workers: images/s after one warm-up epoch's
// first batches.
json loader_rate(const gpufeed::hdf5_source& src, const options& o, std::size_t workers,
                 const gpufeed::target& where) {
  gpufeed::loader_config c;
  c.batch_size = o.batch;
  c.workers = workers;
  c.target = where;
  c.per_record = gpufeed::image::random_resized_crop_transform({.size = o.size});
  gpufeed::loader<gpufeed::hdf5_source> l(src, c);
  for (int k = 0; k < 2 * static_cast<int>(workers) + 2; ++k) (void)l.next();  // warm-up
  std::uint64_t images = 0, batches = 0;
  const auto t0 = clock_type::now();
  while (since(t0) < o.seconds) {
    auto b = l.next();
    if (!b) break;
    images += b->size();
    ++batches;
  }
  const double secs = since(t0);
  const auto s = l.stats();
  return {{"case", "loader/workers=" + std::to_string(workers)}, {"workers", workers},
          {"images_per_s", static_cast<double>(images) / secs}, {"batches", batches},
          {"seconds", secs}, {"target", where.name()},
          {"consumer_wait_s", s.consumer_wait_seconds}};
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"image_bench: decode + random-resized crop + flip, images/s"};
  app.add_option("--photos", o.photos, "photo directory (class folders of JPEGs)")->required();
  app.add_option("--shards", o.shards, "where the photos are packed (default PHOTOS-shards)");
  app.add_option("--workers", o.workers, "worker / thread counts")->delimiter(',');
  app.add_option("--seconds", o.seconds, "timed seconds per case");
  app.add_option("--size", o.size, "crop size");
  app.add_option("--batch", o.batch, "loader batch size");
  app.add_option("--target", o.target, "auto (GPU when usable) or host")
      ->check(CLI::IsMember({"auto", "host"}));
  app.add_option("--peer", o.peer, "JSON from bench/peers/pytorch_images.py");
  app.add_flag("--json", o.json_out, "one JSON array on stdout");
  CLI11_PARSE(app, argc, argv);
  if (o.shards.empty()) o.shards = o.photos.string() + "-shards";
  try {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    for (auto& w : o.workers) w = std::clamp<std::size_t>(w, 1, hw);
    std::sort(o.workers.begin(), o.workers.end());
    o.workers.erase(std::unique(o.workers.begin(), o.workers.end()), o.workers.end());
    const auto inputs = gpufeed::list_directory(o.photos, true);
    const auto files = load_files(inputs);
    std::uint64_t bytes = 0;
    for (auto& f : files) bytes += f.size();
    std::fprintf(stderr, "image_bench: %zu files, %.1f MB, %u hardware threads, crop %d\n",
                 files.size(), double(bytes) / 1e6, hw, o.size);
    json results = json::array();
    const gpufeed::image::train_crop_options co{.size = o.size};
    const double one = crop_rate(files, 1, co, o.seconds);
    results.push_back({{"case", "crop/threads=1"}, {"workers", 1}, {"images_per_s", one}});
    std::fprintf(stderr, "crop/threads=1        %9.0f images/s\n", one);
    for (std::size_t w : o.workers) {
      if (w == 1) continue;
      const double r = crop_rate(files, w, co, o.seconds);
      results.push_back({{"case", "crop/threads=" + std::to_string(w)}, {"workers", w},
                         {"images_per_s", r}, {"x_single_thread", r / one}});
      std::fprintf(stderr, "crop/threads=%-3zu      %9.0f images/s (%.2f x W x one thread)\n", w,
                   r, r / one / double(w));
    }
    std::string why;
    const gpufeed::target where =
        o.target == "host" ? gpufeed::target::host() : gpufeed::device_or_host(0, &why);
    if (where.is_host() && o.target == "auto") std::fprintf(stderr, "host target: %s\n", why.c_str());
    const auto t0 = clock_type::now();
    const gpufeed::hdf5_source src(packed(o, inputs));
    std::fprintf(stderr, "shards: %s (%.1f s)\n", o.shards.c_str(), since(t0));
    json peer = json::array();
    if (!o.peer.empty()) {
      std::ifstream f(o.peer);
      peer = json::parse(f);
    }
    for (std::size_t w : o.workers) {
      json r = loader_rate(src, o, w, where);
      const double rate = r["images_per_s"].get<double>();
      r["x_workers_single_thread"] = rate / (double(w) * one);
      r["scaling_target_pass"] = rate >= 0.8 * double(w) * one;
      std::string vs;
      for (const auto& p : peer)
        if (p.value("workers", -1) == static_cast<int>(w) && p.contains("images_per_s")) {
          const double t = p["images_per_s"].get<double>();
          r["pytorch_images_per_s"] = t;
          r["x_pytorch"] = rate / t;
          r["pytorch_target_pass"] = rate >= 2 * t;
          vs = ", " + std::to_string(rate / t).substr(0, 5) + " x PyTorch";
        }
      std::fprintf(stderr, "loader/workers=%-3zu    %9.0f images/s (%.2f x W x one thread%s) %s\n",
                   w, rate, rate / (double(w) * one), vs.c_str(), where.name().c_str());
      results.push_back(std::move(r));
    }
    if (o.json_out) std::printf("%s\n", results.dump(1).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "image_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
