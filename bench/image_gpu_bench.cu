// image_gpu_bench: images/s of JPEG decode + RandomResizedCrop + flip + normalise into GPU
// memory, on image_bench's photo set and shards, two ways in one run:
//   gpu/workers=W   cuda::image_loader: the loader's W workers only read each record's
//                   compressed bytes; next() copies each batch into pinned memory and
//                   cuda::jpeg_batch_decoder decodes it with nvJPEG's batched API (hardware
//                   engines where the probe finds them) and crops it with the fused kernel into
//                   a device batch (--dtype, CHW, ImageNet mean/std), three batches in flight;
//                   the JPEGs nvJPEG cannot take are decoded on W host threads
//                   (the submitting one among them), which also take a share of the GPU's
//                   JPEGs when they would finish first (jpeg_decode_options::host_share)
//   gpu-only/workers=W  the same without that share: the GPU decodes every JPEG it can
//   cpu/workers=W   the loader with random_resized_crop_transform in W workers (TurboJPEG +
//                   the CPU resample, CHW) to the device target, then cuda::normalizer to
//                   half: today's path, for comparison
// and gpu-decode-only/batch (the decoder alone on batches already in pinned memory, 4 host
// threads: the GPU side's ceiling). Every case runs for --seconds after a warm-up, and reports
// the p50 / p99 of the time the consuming loop waited per batch.
// With --step-ms S, gpu+step, gpu-only+step and cpu+step run again with a simulated
// training step: a kernel on its own stream, S ms on every SM (256 threads a block, so the
// loader's kernels still find room), after each batch is ready and before its buffer is reused;
// `step_ratio` = time per batch / max(the same case's time per batch without the step, S).
//
//   image_gpu_bench --photos DIR [--shards DIR] [--workers 1,2,4] [--seconds 3] [--size 224]
//                   [--batch 256] [--dtype f16|f32|bf16|u8] [--step-ms S] [--json]
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
#include "gpufeed/cuda/image_loader.cuh"
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
  double step_ms = 0;
  bool json_out = false;
};

// The simulated training step: every thread spins until `ns` nanoseconds of the GPU's global
// timer have passed since it started.
__global__ void step_kernel(unsigned long long ns) {
  unsigned long long t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

// Queues one simulated step on `s` after `ready`.
void step(cudaStream_t s, cudaEvent_t ready, double ms) {
  static const int sms = [] {
    int d = 0, n = 0;
    GPUFEED_CUDA_TRY(cudaGetDevice(&d));
    GPUFEED_CUDA_TRY(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, d));
    return n;
  }();
  GPUFEED_CUDA_TRY(cudaStreamWaitEvent(s, ready, 0));
  step_kernel<<<sms, 256, 0, s>>>(static_cast<unsigned long long>(ms * 1e6));
  GPUFEED_CUDA_TRY(cudaGetLastError());
}

// p50 and p99 of the waits, in milliseconds, into `j`.
void latency(json& j, std::vector<double> waits) {
  if (waits.empty()) return;
  std::sort(waits.begin(), waits.end());
  const auto at = [&](double q) {
    return waits[std::min(waits.size() - 1, static_cast<std::size_t>(q * static_cast<double>(waits.size())))] * 1e3;
  };
  j["batch_ms_p50"] = at(0.50);
  j["batch_ms_p99"] = at(0.99);
  j["batches"] = waits.size();
}

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

gpufeed::cuda::jpeg_dtype dtype_of(const std::string& s) {
  using gpufeed::cuda::jpeg_dtype;
  return s == "u8" ? jpeg_dtype::u8 : s == "f32" ? jpeg_dtype::f32 : s == "bf16" ? jpeg_dtype::bf16 : jpeg_dtype::f16;
}

gpufeed::cuda::jpeg_decode_options decode_options(const options& o, std::size_t host_threads,
                                                  bool share = true) {
  gpufeed::cuda::jpeg_decode_options d;
  d.host_threads = host_threads;
  d.host_share = share;
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

json gpu_rate(const gpufeed::hdf5_source& src, const options& o, std::size_t workers, bool share,
              double step_ms) {
  gpufeed::cuda::image_loader_config c;
  c.loader.batch_size = o.batch;
  c.loader.workers = workers;
  c.loader.seed = 1;
  c.decode = decode_options(o, workers, share);
  gpufeed::cuda::image_loader<gpufeed::hdf5_source> l(src, c);
  gpufeed::cuda::stream compute;  // the consumer: the simulated step, when there is one
  std::vector<double> waits;
  auto one = [&](bool count) {
    const auto t0 = clock_type::now();
    auto b = l.next(compute);
    if (!b) return false;
    if (step_ms > 0) step(compute, b->ready(), step_ms);
    if (count) waits.push_back(since(t0));
    return true;  // b released: its memory is reused once `compute` has passed this point
  };
  for (int k = 0; k < 3; ++k) one(false);
  const auto s0 = l.image_stats();
  const auto t0 = clock_type::now();
  while (since(t0) < o.seconds && one(true)) {
  }
  GPUFEED_CUDA_TRY(cudaStreamSynchronize(compute));
  GPUFEED_CUDA_TRY(cudaDeviceSynchronize());
  const double secs = since(t0);
  const auto s1 = l.image_stats();
  const std::string name = std::string(share ? "gpu" : "gpu-only") + (step_ms > 0 ? "+step" : "");
  json j = {{"case", name + "/workers=" + std::to_string(workers)}, {"workers", workers},
            {"images_per_s", static_cast<double>(s1.images - s0.images) / secs}, {"seconds", secs},
            {"nvjpeg_backend", gpufeed::image::to_string(l.capability().backend)},
            {"decoded_gpu", s1.decoded_gpu - s0.decoded_gpu},
            {"decoded_cpu", s1.decoded_cpu - s0.decoded_cpu},
            {"moved_to_cpu", s1.moved_to_cpu - s0.moved_to_cpu}, {"failed", s1.failed - s0.failed}};
  // The consuming thread's time per batch, by part (cuda::image_loader_stats).
  const double n = static_cast<double>(std::max<std::size_t>(waits.size(), 1));
  j["ms_per_batch"] = {{"wait", (s1.wait_seconds - s0.wait_seconds) * 1e3 / n},
                       {"copy", (s1.copy_seconds - s0.copy_seconds) * 1e3 / n},
                       {"decode", (s1.decode_seconds - s0.decode_seconds) * 1e3 / n},
                       {"plan", (s1.plan_seconds - s0.plan_seconds) * 1e3 / n},
                       {"submit", (s1.submit_seconds - s0.submit_seconds) * 1e3 / n},
                       {"host", (s1.host_seconds - s0.host_seconds) * 1e3 / n}};
  latency(j, std::move(waits));
  return j;
}

json cpu_rate(const gpufeed::hdf5_source& src, const options& o, std::size_t workers,
              double step_ms) {
  gpufeed::loader_config c;
  c.batch_size = o.batch;
  c.workers = workers;
  c.target = gpufeed::cuda::device(0);
  c.per_record = gpufeed::image::random_resized_crop_transform(
      {.size = o.size, .layout = gpufeed::image::pixel_layout::chw});
  gpufeed::loader<gpufeed::hdf5_source> l(src, c);
  const auto n = static_cast<std::size_t>(o.size) * o.size * 3;
  gpufeed::cuda::device_buffer out(n * o.batch * 4);
  gpufeed::cuda::stream s, compute;
  gpufeed::cuda::event ready;
  const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
  const gpufeed::cuda::normalizer<__half> norm(gpufeed::cuda::channel_layout::chw, n, mean, sd, 1.0f / 255);
  std::uint64_t images = 0;
  std::vector<double> waits;
  auto one = [&](bool count) {
    const auto t0 = clock_type::now();
    // The previous step reads `out`: this batch's normalised copy waits for it.
    if (step_ms > 0) GPUFEED_CUDA_TRY(cudaStreamSynchronize(compute));
    auto b = l.next();
    if (!b) return false;
    norm(reinterpret_cast<const std::uint8_t*>(b->data().data()), out.as<__half>(), b->size(), s);
    if (step_ms > 0) {
      ready.record(s);
      step(compute, ready, step_ms);
    }
    GPUFEED_CUDA_TRY(cudaStreamSynchronize(s));
    if (count) images += b->size(), waits.push_back(since(t0));
    return true;
  };
  for (int k = 0; k < 2 * static_cast<int>(workers) + 2; ++k) one(false);
  const auto t0 = clock_type::now();
  while (since(t0) < o.seconds && one(true)) {
  }
  GPUFEED_CUDA_TRY(cudaStreamSynchronize(compute));
  const double secs = since(t0);
  json j = {{"case", (step_ms > 0 ? "cpu+step" : "cpu") + std::string("/workers=") + std::to_string(workers)},
            {"workers", workers}, {"images_per_s", static_cast<double>(images) / secs},
            {"seconds", secs}};
  latency(j, std::move(waits));
  return j;
}

// step_ratio of a +step case against the same path's case without the step.
void step_ratio(json& with, const json& without, const options& o) {
  const double per_batch = static_cast<double>(o.batch) / with["images_per_s"].get<double>();
  const double load = static_cast<double>(o.batch) / without["images_per_s"].get<double>();
  with["step_ms"] = o.step_ms;
  with["step_ratio"] = per_batch / std::max(load, o.step_ms / 1e3);
}

// The decoder alone on one batch of the shards' first records, already in pinned memory.
json decode_only(const gpufeed::hdf5_source& src, const options& o) {
  gpufeed::loader_config c;
  c.batch_size = o.batch;
  c.workers = 2;
  gpufeed::loader<gpufeed::hdf5_source> l(src, c);
  auto b = l.next();
  gpufeed::cuda::pinned_buffer pin;
  const auto items = gpufeed::cuda::detail::stage_jpegs(*b, pin, [&](std::size_t k) {
    gpufeed::error_context where;
    where.record = b->indices()[k];
    return where;
  });
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
  app.add_option("--step-ms", o.step_ms, "also run with a simulated GPU step of this many ms");
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
    const auto show = [&](json x) {
      std::fprintf(stderr, "%-28s %9.0f images/s  batch p50 %6.2f ms  p99 %6.2f ms", x["case"].get<std::string>().c_str(),
                   x["images_per_s"].get<double>(), x.value("batch_ms_p50", 0.0), x.value("batch_ms_p99", 0.0));
      if (x.contains("step_ratio")) std::fprintf(stderr, "  step ratio %.3f", x["step_ratio"].get<double>());
      if (x.contains("ms_per_batch")) {
        const json& m = x["ms_per_batch"];
        std::fprintf(stderr, "  ms/batch: wait %.1f copy %.1f decode %.1f (plan %.1f submit %.1f host %.1f)",
                     m["wait"].get<double>(), m["copy"].get<double>(), m["decode"].get<double>(),
                     m["plan"].get<double>(), m["submit"].get<double>(), m["host"].get<double>());
      }
      if (x.contains("moved_to_cpu")) std::fprintf(stderr, "  host took %llu of the GPU's", static_cast<unsigned long long>(x["moved_to_cpu"].get<std::uint64_t>()));
      std::fprintf(stderr, "\n");
      results.push_back(std::move(x));
    };
    for (std::size_t w : o.workers) {
      json g = gpu_rate(src, o, w, true, 0), c = cpu_rate(src, o, w, 0);
      show(g);
      show(gpu_rate(src, o, w, false, 0));
      show(c);
      if (o.step_ms > 0) {
        json gs = gpu_rate(src, o, w, true, o.step_ms), cs = cpu_rate(src, o, w, o.step_ms);
        json go = gpu_rate(src, o, w, false, o.step_ms);
        step_ratio(gs, g, o);
        step_ratio(go, g, o);
        step_ratio(cs, c, o);
        show(std::move(gs));
        show(std::move(go));
        show(std::move(cs));
      }
    }
    if (o.json_out) std::printf("%s\n", results.dump(1).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "image_gpu_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
