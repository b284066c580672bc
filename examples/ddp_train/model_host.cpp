// The host model: the same math as model_cuda.cu, in plain loops over the batch.
#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <utility>

#include "model.hpp"

namespace ddp {

std::vector<float> initial_parameters(const model_shape& s, std::uint64_t seed) {
  std::vector<float> p(s.parameters(), 0.0f);
  std::mt19937_64 rng(seed);
  auto glorot = [&](float* w, std::size_t n, std::size_t fan_in, std::size_t fan_out) {
    const double a = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    // rng() / 2^64 by hand: std::uniform_real_distribution's algorithm is the library's choice.
    for (std::size_t i = 0; i < n; ++i)
      w[i] = static_cast<float>((static_cast<double>(rng() >> 11) * 0x1p-53 * 2 - 1) * a);
  };
  glorot(p.data(), s.hidden * s.features, s.features, s.hidden);
  glorot(p.data() + s.hidden * s.features + s.hidden, s.classes * s.hidden, s.hidden, s.classes);
  return p;
}

void check_records(const gpufeed::batch& b, std::size_t features) {
  const auto off = b.host_offsets();
  const std::uint64_t bytes = features * sizeof(float);
  for (std::size_t k = 0; k < b.size(); ++k)
    if (off[k + 1] - off[k] != bytes || off[k] != k * bytes)
      throw std::runtime_error("record " + std::to_string(b.host_indices()[k]) + " is " +
                               std::to_string(off[k + 1] - off[k]) + " bytes at offset " +
                               std::to_string(off[k]) + "; the model takes " +
                               std::to_string(features) + " float32 back to back");
}

namespace {

class host_model final : public model {
 public:
  host_model(const train_settings& s, comm& c)
      : s_(s), comm_(c), p_(initial_parameters(s.shape, s.seed)), g_(p_.size()),
        h_(s.shape.hidden), dh_(s.shape.hidden), z_(s.shape.classes) {}

  gpufeed::stream_handle stream() const noexcept override { return nullptr; }

  void step(const gpufeed::batch& b) override {
    const std::size_t D = s_.shape.features, H = s_.shape.hidden, C = s_.shape.classes;
    check_records(b, D);
    const float* W1 = p_.data();
    const float* b1 = W1 + H * D;
    const float* W2 = b1 + H;
    const float* b2 = W2 + C * H;
    float* gW1 = g_.data();
    float* gb1 = gW1 + H * D;
    float* gW2 = gb1 + H;
    float* gb2 = gW2 + C * H;
    std::fill(g_.begin(), g_.end(), 0.0f);
    const float scale = 1.0f / static_cast<float>(s_.global_batch);
    const auto labels = b.host_labels();
    const auto* X = reinterpret_cast<const float*>(b.data().data());
    for (std::size_t i = 0; i < b.size(); ++i) {
      const float* x = X + i * D;
      const auto y = labels[i];
      if (y < 0 || static_cast<std::size_t>(y) >= C)
        throw std::runtime_error("label " + std::to_string(y) + " of record " +
                                 std::to_string(b.host_indices()[i]) + " is not below " +
                                 std::to_string(C));
      for (std::size_t j = 0; j < H; ++j) {
        float a = 0;
        for (std::size_t d = 0; d < D; ++d) a += W1[j + d * H] * x[d];
        h_[j] = std::max(0.0f, a + b1[j]);
      }
      float zmax = -INFINITY;
      for (std::size_t c = 0; c < C; ++c) {
        float a = 0;
        for (std::size_t j = 0; j < H; ++j) a += W2[c + j * C] * h_[j];
        z_[c] = a + b2[c];
        zmax = std::max(zmax, z_[c]);
      }
      float sum = 0;
      for (std::size_t c = 0; c < C; ++c) sum += std::exp(z_[c] - zmax);
      loss_.loss += static_cast<double>(std::log(sum) - (z_[static_cast<std::size_t>(y)] - zmax));
      for (std::size_t c = 0; c < C; ++c)  // dz = (softmax - onehot) / global batch
        z_[c] = (std::exp(z_[c] - zmax) / sum - (c == static_cast<std::size_t>(y) ? 1.0f : 0.0f)) * scale;
      for (std::size_t j = 0; j < H; ++j) {
        float a = 0;
        for (std::size_t c = 0; c < C; ++c) {
          gW2[c + j * C] += z_[c] * h_[j];
          a += W2[c + j * C] * z_[c];
        }
        dh_[j] = h_[j] > 0 ? a : 0.0f;
        gb1[j] += dh_[j];
      }
      for (std::size_t c = 0; c < C; ++c) gb2[c] += z_[c];
      for (std::size_t d = 0; d < D; ++d)
        for (std::size_t j = 0; j < H; ++j) gW1[j + d * H] += dh_[j] * x[d];
    }
    loss_.samples += b.size();
    all_reduce_sum_ordered(comm_, std::span<float>(g_));
    for (std::size_t k = 0; k < p_.size(); ++k) p_[k] -= s_.learning_rate * g_[k];
  }

  loss_sum take_loss() override { return std::exchange(loss_, {}); }
  std::vector<float> parameters() override { return p_; }
  void set_parameters(std::span<const float> p) override {
    if (p.size() != p_.size()) throw std::runtime_error("parameter count differs from the model's");
    p_.assign(p.begin(), p.end());
  }
  std::string describe() const override { return "host MLP, gradients summed over the ranks in rank order"; }

 private:
  train_settings s_;
  comm& comm_;
  std::vector<float> p_, g_, h_, dh_, z_;
  loss_sum loss_;
};

}  // namespace

std::unique_ptr<model> make_host_model(const train_settings& s, comm& c) {
  return std::make_unique<host_model>(s, c);
}

}  // namespace ddp
