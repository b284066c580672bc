// train_step for builds without nvcc: host target only.
#include <chrono>
#include <stdexcept>
#include <thread>

#include "train_step.hpp"

namespace gpufeed::train {

gpufeed::target device_target(int) {
  throw std::runtime_error("this train_loop was built without CUDA: use --target host");
}
gpufeed::target device_or_host(std::string* why) {
  if (why) *why = "this train_loop was built without CUDA";
  return gpufeed::target::host();
}

bool add_image_normalize(gpufeed::loader_config&, std::size_t) { return false; }

struct step::impl {
  double step_us;
  std::uint64_t sum = 0;
};

step::step(const gpufeed::target& where, double step_us) : impl_(std::make_unique<impl>()) {
  if (!where.is_host()) throw std::runtime_error("host-only train_step given a device target");
  impl_->step_us = step_us;
}
step::~step() = default;
gpufeed::stream_handle step::stream() const noexcept { return nullptr; }
void step::operator()(const gpufeed::batch& b) {
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t s = 0;
  for (std::byte x : b.data()) s += static_cast<unsigned char>(x);
  impl_->sum += s;
  std::this_thread::sleep_until(t0 + std::chrono::duration<double, std::micro>(impl_->step_us));
}
void step::finish() {}
std::uint64_t step::checksum() { return impl_->sum; }

}  // namespace gpufeed::train
