// Builds without nvcc, NCCL or cuBLAS: the host model only.
#include <stdexcept>

#include "model.hpp"

namespace ddp {

std::unique_ptr<model> make_device_model(const train_settings&, comm&, int) {
  throw std::runtime_error("this ddp_train was built without the device model (nvcc, NCCL, cuBLAS)");
}
bool device_model_built() noexcept { return false; }

}  // namespace ddp
