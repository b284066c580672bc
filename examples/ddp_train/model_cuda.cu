// The device model: model_host.cpp's math with cuBLAS (column-major, so a batch's row-major
// [records x features] floats are the matrix X^T [features x records] as they lie) and small
// kernels, all on one stream that is also the loader's consumer stream; the gradients are summed
// by ncclAllReduce on that stream. Nothing waits on the host in a step.
#include <cublas_v2.h>
#include <nccl.h>

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/stream.hpp"
#include "model.hpp"

namespace ddp {
namespace {

void cublas_try(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": " + cublasGetStatusString(s));
}
void nccl_try(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r));
}

__global__ void bias_relu(float* h, const float* b, std::size_t rows, std::size_t n) {
  const std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < rows * n) h[k] = fmaxf(0.0f, h[k] + b[k % rows]);
}

// z (classes x n) holds the logits without bias; writes (softmax - onehot) * scale over them and
// adds the batch's cross-entropy to *loss. One thread per sample. *bad gets 1 on a label out of
// range (that sample then contributes nothing).
__global__ void softmax_xent(float* z, const float* b, const std::int64_t* labels, std::size_t classes,
                             std::size_t n, float scale, double* loss, int* bad) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float* zi = z + i * classes;
  const std::int64_t y = labels[i];
  if (y < 0 || y >= static_cast<std::int64_t>(classes)) {
    for (std::size_t c = 0; c < classes; ++c) zi[c] = 0;
    atomicExch(bad, 1);
    return;
  }
  float zmax = -INFINITY;
  for (std::size_t c = 0; c < classes; ++c) zmax = fmaxf(zmax, zi[c] + b[c]);
  float sum = 0;
  for (std::size_t c = 0; c < classes; ++c) sum += expf(zi[c] + b[c] - zmax);
  atomicAdd(loss, static_cast<double>(logf(sum) - (zi[y] + b[y] - zmax)));
  for (std::size_t c = 0; c < classes; ++c)
    zi[c] = (expf(zi[c] + b[c] - zmax) / sum - (static_cast<std::int64_t>(c) == y ? 1.0f : 0.0f)) * scale;
}

__global__ void relu_mask(float* dh, const float* h, std::size_t count) {
  const std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < count && h[k] <= 0) dh[k] = 0;
}

__global__ void sgd(float* p, const float* g, std::size_t count, float lr) {
  const std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < count) p[k] -= lr * g[k];
}

__global__ void fill(float* p, std::size_t count, float v) {
  const std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < count) p[k] = v;
}

unsigned blocks(std::size_t n) { return static_cast<unsigned>((n + 255) / 256); }

class device_model final : public model {
 public:
  device_model(const train_settings& s, comm& c, int device) : s_(s), device_(device) {
    GPUFEED_CUDA_TRY(cudaSetDevice(device));
    stream_.emplace();
    const std::size_t H = s.shape.hidden, C = s.shape.classes, B = s.local_batch;
    const std::size_t P = s.shape.parameters();
    p_ = gpufeed::cuda::device_buffer(P * 4);
    g_ = gpufeed::cuda::device_buffer(P * 4);
    h_ = gpufeed::cuda::device_buffer(H * B * 4);
    dh_ = gpufeed::cuda::device_buffer(H * B * 4);
    z_ = gpufeed::cuda::device_buffer(C * B * 4);
    ones_ = gpufeed::cuda::device_buffer(B * 4);
    acc_ = gpufeed::cuda::device_buffer(16);  // double loss, int bad
    set_parameters(initial_parameters(s.shape, s.seed));
    fill<<<blocks(B), 256, 0, *stream_>>>(ones_.as<float>(), B, 1.0f);
    GPUFEED_CUDA_TRY(cudaMemsetAsync(acc_.data(), 0, 16, *stream_));
    cublas_try(cublasCreate(&blas_), "cublasCreate");
    cublas_try(cublasSetStream(blas_, *stream_), "cublasSetStream");
    // NVLink multicast (NVLS) stays off unless the caller's environment says otherwise.
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    ncclUniqueId id{};
    if (c.rank() == 0) nccl_try(ncclGetUniqueId(&id), "ncclGetUniqueId");
    c.broadcast(&id, sizeof id, 0);
    nccl_try(ncclCommInitRank(&nccl_, c.world(), id, c.rank()), "ncclCommInitRank");
    stream_->synchronize();
  }
  ~device_model() override {
    if (stream_) GPUFEED_CUDA_LOG(cudaStreamSynchronize(*stream_));
    if (nccl_) ncclCommDestroy(nccl_);
    if (blas_) cublasDestroy(blas_);
  }

  gpufeed::stream_handle stream() const noexcept override { return stream_->get(); }

  void step(const gpufeed::batch& b) override {
    const int D = static_cast<int>(s_.shape.features), H = static_cast<int>(s_.shape.hidden),
              C = static_cast<int>(s_.shape.classes), n = static_cast<int>(b.size());
    check_records(b, s_.shape.features);
    if (b.size() > s_.local_batch) throw std::runtime_error("batch larger than the local batch");
    float* W1 = p_.as<float>();
    float* b1 = W1 + H * D;
    float* W2 = b1 + H;
    float* b2 = W2 + C * H;
    float* gW1 = g_.as<float>();
    float* gb1 = gW1 + H * D;
    float* gW2 = gb1 + H;
    float* gb2 = gW2 + C * H;
    const auto* X = reinterpret_cast<const float*>(b.data().data());
    float* Hm = h_.as<float>();
    float* dH = dh_.as<float>();
    float* Z = z_.as<float>();
    const float one = 1, zero = 0;
    const float scale = 1.0f / static_cast<float>(s_.global_batch);
    auto* loss = reinterpret_cast<double*>(acc_.data());
    auto* bad = reinterpret_cast<int*>(acc_.as<char>() + 8);
    const std::size_t hn = static_cast<std::size_t>(H) * n;
    // forward: H = relu(W1 X^T + b1), Z = W2 H
    cublas_try(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, H, n, D, &one, W1, H, X, D, &zero, Hm, H), "sgemm W1 X");
    bias_relu<<<blocks(hn), 256, 0, *stream_>>>(Hm, b1, H, n);
    cublas_try(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, C, n, H, &one, W2, C, Hm, H, &zero, Z, C), "sgemm W2 H");
    softmax_xent<<<blocks(n), 256, 0, *stream_>>>(Z, b2, b.labels().data(), C, n, scale, loss, bad);
    // backward: gW2 = dZ H^T, gb2 = dZ 1, dH = W2^T dZ masked, gW1 = dH X, gb1 = dH 1
    cublas_try(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, C, H, n, &one, Z, C, Hm, H, &zero, gW2, C), "sgemm dZ H");
    cublas_try(cublasSgemv(blas_, CUBLAS_OP_N, C, n, &one, Z, C, ones_.as<float>(), 1, &zero, gb2, 1), "sgemv dZ");
    cublas_try(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, H, n, C, &one, W2, C, Z, C, &zero, dH, H), "sgemm W2 dZ");
    relu_mask<<<blocks(hn), 256, 0, *stream_>>>(dH, Hm, hn);
    cublas_try(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, H, D, n, &one, dH, H, X, D, &zero, gW1, H), "sgemm dH X");
    cublas_try(cublasSgemv(blas_, CUBLAS_OP_N, H, n, &one, dH, H, ones_.as<float>(), 1, &zero, gb1, 1), "sgemv dH");
    // the sum over ranks, then the same update everywhere
    const std::size_t P = s_.shape.parameters();
    nccl_try(ncclAllReduce(g_.data(), g_.data(), P, ncclFloat, ncclSum, nccl_, *stream_), "ncclAllReduce");
    sgd<<<blocks(P), 256, 0, *stream_>>>(W1, gW1, P, s_.learning_rate);
    GPUFEED_CUDA_TRY(cudaGetLastError());
    samples_ += b.size();
  }

  loss_sum take_loss() override {
    struct { double loss; int bad; int pad; } h{};
    GPUFEED_CUDA_TRY(cudaMemcpyAsync(&h, acc_.data(), 16, cudaMemcpyDeviceToHost, *stream_));
    GPUFEED_CUDA_TRY(cudaMemsetAsync(acc_.data(), 0, 16, *stream_));
    stream_->synchronize();
    if (h.bad) throw std::runtime_error("a label is not below the model's " +
                                        std::to_string(s_.shape.classes) + " classes");
    return {h.loss, std::exchange(samples_, 0)};
  }

  std::vector<float> parameters() override {
    std::vector<float> p(s_.shape.parameters());
    GPUFEED_CUDA_TRY(cudaMemcpyAsync(p.data(), p_.data(), p.size() * 4, cudaMemcpyDeviceToHost, *stream_));
    stream_->synchronize();
    return p;
  }
  void set_parameters(std::span<const float> p) override {
    if (p.size() != s_.shape.parameters()) throw std::runtime_error("parameter count differs from the model's");
    GPUFEED_CUDA_TRY(cudaMemcpyAsync(p_.data(), p.data(), p.size() * 4, cudaMemcpyHostToDevice, *stream_));
    stream_->synchronize();
  }
  std::string describe() const override {
    return "cuBLAS MLP on cuda:" + std::to_string(device_) + ", gradients by ncclAllReduce (NCCL " +
           std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + ")";
  }

 private:
  train_settings s_;
  int device_;
  std::optional<gpufeed::cuda::stream> stream_;
  gpufeed::cuda::device_buffer p_, g_, h_, dh_, z_, ones_, acc_;
  cublasHandle_t blas_ = nullptr;
  ncclComm_t nccl_ = nullptr;
  std::uint64_t samples_ = 0;
};

}  // namespace

std::unique_ptr<model> make_device_model(const train_settings& s, comm& c, int device) {
  return std::make_unique<device_model>(s, c, device);
}
bool device_model_built() noexcept { return true; }

}  // namespace ddp
