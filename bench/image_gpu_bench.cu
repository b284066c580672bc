// image_gpu_bench: images/s of JPEG decode + RandomResizedCrop + flip + normalise into GPU
// memory, on image_bench's photo set and shards, two ways in one run:
//   gpu/workers=W   the loader's W workers only read each record's compressed bytes (no
//                   transform, host target); the submitting thread copies each batch into
//                   pinned memory and cuda::jpeg_batch_decoder decodes it with nvJPEG's batched
//                   API (hardware engines where the probe finds them) and crops it with the
//                   fused kernel into a device batch (--dtype, CHW, ImageNet mean/std), two
//                   batches in flight; the JPEGs nvJPEG cannot take are decoded on W host threads
//                   (the submitting one among them)
//   cpu/workers=W   the loader with random_resized_crop_transform in W workers (TurboJPEG +
//                   the CPU resample, CHW) to the device target, then cuda::normalizer to
//                   half: today's path, for comparison
// and gpu-decode-only/batch (the decoder alone on batches already in pinned memory, 4 host
// threads: the GPU side's ceiling). Every case runs for --seconds after a warm-up.
//
//   image_gpu_bench --photos DIR [--shards DIR] [--workers 1,2,4] [--seconds 3] [--size 224]
//                   [--batch 256] [--dtype f16|f32|bf16|u8] [--json]
// Progress and a table on stderr; --json prints one JSON array on stdout.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/device_target.hpp"
#include "gpufeed/cuda/jpeg_decode.cuh"
#include "gpufeed/cuda/normalize.cuh"
#include "gpufeed/cuda/pinned.hpp"
#include "gpufeed/cuda/stream.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/image/record_transforms.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/pack/pack.hpp"

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
  fs::path photos, shards;
  std::vector<std::size_t> workers{1, 2, 4};
  double seconds = 3;
  int size = 224;
  std::size_t batch = 256;
  std::string dtype = "f16";
  bool json_out = false;
};

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

gpufeed::cuda::jpeg_dtype dtype_of(const std::string& s) {
  using gpufeed::cuda::jpeg_dtype;
  return s == "u8" ? jpeg_dtype::u8 : s == "f32" ? jpeg_dtype::f32 : s == "bf16" ? jpeg_dtype::bf16 : jpeg_dtype::f16;
}

gpufeed::cuda::jpeg_decode_options decode_options(const options& o, std::size_t host_threads) {
  gpufeed::cuda::jpeg_decode_options d;
  d.host_threads = host_threads;
  d.size = o.size;
  d.layout = gpufeed::image::pixel_layout::chw;
  d.dtype = dtype_of(o.dtype);
  d.normalize = {1.0f / 255, {0.485f, 0.456f, 0.406f}, {1 / 0.229f, 1 / 0.224f, 1 / 0.225f}};
  return d;
}

std::vector<fs::path> packed(const options& o) {
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
  return gpufeed::pack(gpufeed::list_directory(o.photos, true), o.shards, po).shards;
}

// Copies a host batch of JPEG records into pinned memory and names them (shard-free: the
// bench's records are known good; errors are counted).
std::vector<gpufeed::cuda::jpeg_item> stage(const gpufeed::batch& b, gpufeed::cuda::pinned_buffer& pin) {
  const auto data = b.data();
  if (pin.size() < data.size()) pin = gpufeed::cuda::pinned_buffer(data.size() * 2);
  std::memcpy(pin.data(), data.data(), data.size());
  const auto off = b.offsets();
  std::vector<gpufeed::cuda::jpeg_item> items(b.size());
  for (std::size_t k = 0; k < b.size(); ++k) {
    items[k].bytes = {pin.data() + off[k], static_cast<std::size_t>(off[k + 1] - off[k])};
    items[k].where.record = b.indices()[k];
  }
  return items;
}

json gpu_rate(const gpufeed::hdf5_source& src, const options& o, std::size_t workers) {
  gpufeed::loader_config c;
  c.batch_size = o.batch;
  c.workers = workers;
  gpufeed::loader<gpufeed::hdf5_source> l(src, c);
  gpufeed::cuda::jpeg_batch_decoder dec(decode_options(o, workers));
  // Two batches in flight: batch k + 1 is read, staged and planned (and its CPU share decoded)
  // while the GPU decodes batch k; a slot is reused once its batch has run.
  std::array<gpufeed::cuda::device_buffer, 2> out{gpufeed::cuda::device_buffer(dec.record_bytes() * o.batch),
                                                  gpufeed::cuda::device_buffer(dec.record_bytes() * o.batch)};
  std::array<gpufeed::cuda::pinned_buffer, 2> pin;
  std::array<gpufeed::cuda::event, 2> done;
  std::array<bool, 2> busy{false, false};
  gpufeed::cuda::stream s;
  std::uint64_t images = 0, gpu = 0, cpu = 0, failed = 0, k = 0;
  auto one = [&](bool count) {
    auto b = l.next();
    if (!b) return false;
    const std::size_t slot = k++ % 2;
    if (busy[slot]) done[slot].synchronize();
    const auto items = stage(*b, pin[slot]);
    std::vector<gpufeed::record_rng> rngs;
    for (std::size_t i = 0; i < items.size(); ++i) rngs.emplace_back(1, b->epoch(), b->indices()[i]);
    const auto r = dec.decode(items, rngs, out[slot].data(), s);
    done[slot].record(s);
    busy[slot] = true;
    if (count) images += items.size(), gpu += r.gpu, cpu += r.cpu, failed += r.failed;
    return true;
  };
  for (int k = 0; k < 3; ++k) one(false);
  const auto t0 = clock_type::now();
  while (since(t0) < o.seconds && one(true)) {
  }
  GPUFEED_CUDA_TRY(cudaStreamSynchronize(s));
  const double secs = since(t0);
  return {{"case", "gpu/workers=" + std::to_string(workers)}, {"workers", workers},
          {"images_per_s", static_cast<double>(images) / secs}, {"seconds", secs},
          {"nvjpeg_backend", gpufeed::image::to_string(dec.capability().backend)},
          {"decoded_gpu", gpu}, {"decoded_cpu", cpu}, {"failed", failed}};
}

json cpu_rate(const gpufeed::hdf5_source& src, const options& o, std::size_t workers) {
  gpufeed::loader_config c;
  c.batch_size = o.batch;
  c.workers = workers;
  c.target = gpufeed::cuda::device(0);
  c.per_record = gpufeed::image::random_resized_crop_transform(
      {.size = o.size, .layout = gpufeed::image::pixel_layout::chw});
  gpufeed::loader<gpufeed::hdf5_source> l(src, c);
  const auto n = static_cast<std::size_t>(o.size) * o.size * 3;
  gpufeed::cuda::device_buffer out(n * o.batch * 4);
  gpufeed::cuda::stream s;
  const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
  const gpufeed::cuda::normalizer<__half> norm(gpufeed::cuda::channel_layout::chw, n, mean, sd, 1.0f / 255);
  std::uint64_t images = 0;
  auto one = [&](bool count) {
    auto b = l.next();
    if (!b) return false;
    norm(reinterpret_cast<const std::uint8_t*>(b->data().data()), out.as<__half>(), b->size(), s);
    GPUFEED_CUDA_TRY(cudaStreamSynchronize(s));
    if (count) images += b->size();
    return true;
  };
  for (int k = 0; k < 2 * static_cast<int>(workers) + 2; ++k) one(false);
  const auto t0 = clock_type::now();
  while (since(t0) < o.seconds && one(true)) {
  }
  const double secs = since(t0);
  return {{"case", "cpu/workers=" + std::to_string(workers)}, {"workers", workers},
          {"images_per_s", static_cast<double>(images) / secs}, {"seconds", secs}};
}

// The decoder alone on one batch of the shards' first records, already in pinned memory.
json decode_only(const gpufeed::hdf5_source& src, const options& o) {
  gpufeed::loader_config c;
  c.batch_size = o.batch;
  c.workers = 2;
  gpufeed::loader<gpufeed::hdf5_source> l(src, c);
  auto b = l.next();
  gpufeed::cuda::pinned_buffer pin;
  const auto items = stage(*b, pin);
  gpufeed::cuda::jpeg_batch_decoder dec(decode_options(o, 4));
  gpufeed::cuda::device_buffer out(dec.record_bytes() * items.size());
  gpufeed::cuda::stream s;
  std::vector<gpufeed::record_rng> rngs;
  std::uint64_t images = 0, rounds = 0;
  const auto t0 = clock_type::now();
  while (since(t0) < o.seconds) {
    rngs.clear();
    for (std::size_t k = 0; k < items.size(); ++k) rngs.emplace_back(2, rounds, k);
    (void)dec.decode(items, rngs, out.data(), s);
    GPUFEED_CUDA_TRY(cudaStreamSynchronize(s));
    images += items.size();
    ++rounds;
  }
  const double secs = since(t0);
  return {{"case", "gpu-decode-only/batch=" + std::to_string(items.size())}, {"workers", 0},
          {"images_per_s", static_cast<double>(images) / secs}, {"seconds", secs}};
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"image_gpu_bench: nvJPEG + fused crop against the CPU path, images/s"};
  app.add_option("--photos", o.photos, "photo directory (class folders of JPEGs)")->required();
  app.add_option("--shards", o.shards, "where the photos are packed (default PHOTOS-shards)");
  app.add_option("--workers", o.workers, "worker counts")->delimiter(',');
  app.add_option("--seconds", o.seconds, "timed seconds per case");
  app.add_option("--size", o.size, "crop size");
  app.add_option("--batch", o.batch, "batch size");
  app.add_option("--dtype", o.dtype, "output type of the GPU path")
      ->check(CLI::IsMember({"u8", "f32", "f16", "bf16"}));
  app.add_flag("--json", o.json_out, "one JSON array on stdout");
  CLI11_PARSE(app, argc, argv);
  if (o.shards.empty()) o.shards = o.photos.string() + "-shards";
  try {
    const gpufeed::image::nvjpeg_capability cap = gpufeed::image::probe_nvjpeg();
    std::fprintf(stderr, "image_gpu_bench: nvJPEG %s, backend %s%s%s\n", cap.version().c_str(),
                 gpufeed::image::to_string(cap.backend), cap.notice.empty() ? "" : ": ",
                 cap.notice.c_str());
    const gpufeed::hdf5_source src(packed(o));
    json results = json::array();
    json r = decode_only(src, o);
    std::fprintf(stderr, "%-28s %9.0f images/s\n", r["case"].get<std::string>().c_str(),
                 r["images_per_s"].get<double>());
    results.push_back(std::move(r));
    for (std::size_t w : o.workers) {
      for (json x : {gpu_rate(src, o, w), cpu_rate(src, o, w)}) {
        std::fprintf(stderr, "%-28s %9.0f images/s\n", x["case"].get<std::string>().c_str(),
                     x["images_per_s"].get<double>());
        results.push_back(std::move(x));
      }
    }
    if (o.json_out) std::printf("%s\n", results.dump(1).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "image_gpu_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
