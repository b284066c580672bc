// train_loop's stand-in for a model step: it reads every byte of a batch — the GPU transform's
// output when the batch has one, else the records — (a checksum, so the data dependency is real) and then takes a set time. On a device target both run as kernels on the
// step's own stream — the loader's consumer stream — and nothing waits on the host; on the host
// target the checksum runs on the calling thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gpufeed/batch.hpp"
#include "gpufeed/loader_config.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed::train {

// cuda:id, or throws when this build has no CUDA or the machine no device.
gpufeed::target device_target(int id);
// cuda:0 when usable, else the host target with the reason in *why.
gpufeed::target device_or_host(std::string* why);

// --images: ImageNet's per-channel normalisation of the uint8 HWC crops (record_bytes each) into
// float HWC in batch::output(), as a GPU transform after the copy (cuda::normalizer). Returns
// false (and sets nothing) on the host target or in a build without nvcc.
bool add_image_normalize(gpufeed::loader_config& c, std::size_t record_bytes);

class step {
 public:
  step(const gpufeed::target& where, double step_us);
  ~step();
  step(const step&) = delete;
  step& operator=(const step&) = delete;

  // The stream the loader's consumer work runs on (nullptr on the host target).
  [[nodiscard]] gpufeed::stream_handle stream() const noexcept;
  // Queues the step for batch b (returns at once on a device target).
  void operator()(const gpufeed::batch& b);
  // Waits for queued steps (end of an epoch: not part of the steady state).
  void finish();
  [[nodiscard]] std::uint64_t checksum();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace gpufeed::train
