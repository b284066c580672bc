// train_step with CUDA: checksum and timed step as kernels on the consumer stream.
#include <chrono>
#include <optional>
#include <thread>

#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/device_target.hpp"
#include "gpufeed/cuda/normalize.cuh"
#include "gpufeed/cuda/stream.hpp"
#include "train_step.hpp"

namespace gpufeed::train {

namespace {
__global__ void byte_sum(const unsigned char* data, std::size_t n, unsigned long long* out) {
  unsigned long long s = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // 16-byte loads over the aligned body (slot data starts 256-byte aligned).
  const std::size_t vec = n / 16;
  for (std::size_t v = i; v < vec; v += stride) {
    const uint4 w = reinterpret_cast<const uint4*>(data)[v];
    for (unsigned x : {w.x, w.y, w.z, w.w})
      s += (x & 0xff) + ((x >> 8) & 0xff) + ((x >> 16) & 0xff) + (x >> 24);
  }
  for (std::size_t j = vec * 16 + i; j < n; j += stride) s += data[j];
  for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0 && s) atomicAdd(out, s);
}
__global__ void spin(double microseconds) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (static_cast<double>(t - t0) < microseconds * 1e3);
}
}  // namespace

gpufeed::target device_target(int id) { return cuda::device(id); }
gpufeed::target device_or_host(std::string* why) { return cuda::device_or_host(0, why); }

bool add_image_normalize(gpufeed::loader_config& c, std::size_t record_bytes) {
  if (c.target.is_host()) return false;
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stddev[3] = {0.229f, 0.224f, 0.225f};
  cuda::normalizer<float> n(cuda::channel_layout::hwc, record_bytes, mean, stddev, 1.0f / 255);
  c.transform = cuda::normalize_transform<float>(n);
  c.transform_output_bytes = c.batch_size * record_bytes * sizeof(float);
  return true;
}

struct step::impl {
  bool device = false;
  double step_us = 0;
  std::uint64_t host_sum = 0;
  std::optional<cuda::stream> s;
  cuda::device_buffer sum;
};

step::step(const gpufeed::target& where, double step_us) : impl_(std::make_unique<impl>()) {
  impl_->step_us = step_us;
  impl_->device = !where.is_host();
  if (impl_->device) {
    GPUFEED_CUDA_TRY(cudaSetDevice(where.device()));
    impl_->s.emplace();
    impl_->sum = cuda::device_buffer(sizeof(unsigned long long));
    GPUFEED_CUDA_TRY(cudaMemsetAsync(impl_->sum.data(), 0, 8, *impl_->s));
  }
}
step::~step() = default;
gpufeed::stream_handle step::stream() const noexcept { return impl_->s ? impl_->s->get() : nullptr; }

void step::operator()(const gpufeed::batch& b) {
  if (!impl_->device) {
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t s = 0;
    for (std::byte x : b.data()) s += static_cast<unsigned char>(x);
    impl_->host_sum += s;
    std::this_thread::sleep_until(t0 + std::chrono::duration<double, std::micro>(impl_->step_us));
    return;
  }
  // The transform's output (e.g. normalised floats) when there is one: what a model would read.
  const std::span<const std::byte> in = b.output().empty() ? b.data() : b.output();
  const std::size_t n = in.size();
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>(1024, (n / 16 + 255) / 256 + 1));
  byte_sum<<<blocks, 256, 0, *impl_->s>>>(reinterpret_cast<const unsigned char*>(in.data()), n,
                                          impl_->sum.as<unsigned long long>());
  GPUFEED_CUDA_TRY(cudaGetLastError());
  if (impl_->step_us > 0) {
    spin<<<1, 1, 0, *impl_->s>>>(impl_->step_us);
    GPUFEED_CUDA_TRY(cudaGetLastError());
  }
}

void step::finish() {
  if (impl_->s) impl_->s->synchronize();
}

std::uint64_t step::checksum() {
  if (!impl_->device) return impl_->host_sum;
  unsigned long long h = 0;
  GPUFEED_CUDA_TRY(cudaMemcpyAsync(&h, impl_->sum.data(), 8, cudaMemcpyDeviceToHost, *impl_->s));
  impl_->s->synchronize();
  return h;
}

}  // namespace gpufeed::train
