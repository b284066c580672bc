// ddp_train's model: a two-layer perceptron (features -> hidden, ReLU -> classes, softmax
// cross-entropy) trained by plain SGD, data-parallel: each rank computes the gradient of its
// local batch scaled by 1 / global batch, the ranks sum the gradients (an all-reduce), and every
// rank applies the same update, so the weights stay identical and a step of W ranks with local
// batch B is a step of one rank with batch W x B (up to the order of float additions).
//
// Parameters are one flat float array (one all-reduce per step):
//   W1 [hidden x features] column-major | b1 [hidden] | W2 [classes x hidden] column-major | b2
// (column-major so the device version hands them to cuBLAS as they are).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm.hpp"
#include "gpufeed/batch.hpp"

namespace ddp {

struct model_shape {
  std::size_t features = 32, hidden = 32, classes = 4;
  [[nodiscard]] std::size_t parameters() const noexcept {
    return hidden * features + hidden + classes * hidden + classes;
  }
};

// Glorot-uniform weights and zero biases from `seed` (the same on every rank and both targets).
std::vector<float> initial_parameters(const model_shape& shape, std::uint64_t seed);

struct loss_sum {
  double loss = 0;           // summed cross-entropy of the samples seen
  std::uint64_t samples = 0;
};

class model {
 public:
  virtual ~model() = default;
  // The stream the loader's consumer work runs on (nullptr on the host).
  [[nodiscard]] virtual gpufeed::stream_handle stream() const noexcept = 0;
  // One SGD step on batch b (records of shape.features float32, labels in [0, classes)); on
  // the device it is queued on stream() and returns at once. Every rank must call it the same
  // number of times (it contains the all-reduce).
  virtual void step(const gpufeed::batch& b) = 0;
  // Waits for queued steps; this rank's loss since the last call (then resets it).
  virtual loss_sum take_loss() = 0;
  // Host copy of the parameters (waits for queued steps), and replacing them (a resume).
  [[nodiscard]] virtual std::vector<float> parameters() = 0;
  virtual void set_parameters(std::span<const float> p) = 0;
  [[nodiscard]] virtual std::string describe() const = 0;
};

struct train_settings {
  model_shape shape;
  float learning_rate = 0.5f;
  std::size_t local_batch = 0, global_batch = 0;
  std::uint64_t seed = 1;
};

// Throws std::runtime_error unless b's records are `features` float32 each, back to back (the
// packed blob layout reports variable sizes, so the offsets are checked, not record_bytes()).
void check_records(const gpufeed::batch& b, std::size_t features);

// CPU math; the gradient sum is all_reduce_sum_ordered (MPI all-gather, fixed order).
std::unique_ptr<model> make_host_model(const train_settings& s, comm& c);
// cuBLAS + kernels on a stream of `device`, the gradient sum by ncclAllReduce on that stream
// (NCCL's unique id broadcast over `c`). Throws std::runtime_error in builds without CUDA/NCCL.
std::unique_ptr<model> make_device_model(const train_settings& s, comm& c, int device);
// Whether make_device_model can work in this build.
bool device_model_built() noexcept;

}  // namespace ddp
