// Batches on a device target exported as DLPack tensors: kDLCUDA with the batch's device id,
// the device pointer of the batch itself, the values the shard holds (copied back to check),
// and the batch held until the deleter runs on another thread. Exits 77 without a GPU.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "float_shard.hpp"
#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device_target.hpp"
#include "gpufeed/dlpack.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"

using namespace gpufeed;
using gpufeed::test::label_of;
using gpufeed::test::value_of;

TEST_CASE("dlpack on cuda:0: kDLCUDA tensors of the batch's device memory, held until deleted") {
  gpufeed::test::float_shard shard;
  hdf5_source src(shard.path);
  loader_config c;
  c.batch_size = 8;
  c.order = sample_order::sequential;
  c.epochs = 1;
  c.part = partition{};
  c.max_held_batches = 1;
  c.target = gpufeed::cuda::device(0);
  loader<hdf5_source> feed(src, c);
  auto b = feed.next();
  REQUIRE(b);
  REQUIRE(b->on_device());
  const void* data = b->data().data();
  const std::vector<std::uint64_t> indices(b->host_indices().begin(), b->host_indices().end());
  const dlpack_tensors t = to_dlpack(std::move(*b), dlpack_layout_of(src));
  const DLTensor& x = t.data->dl_tensor;
  CHECK(x.device.device_type == kDLCUDA);
  CHECK(x.device.device_id == 0);
  CHECK(x.data == data);
  CHECK(t.labels->dl_tensor.device.device_type == kDLCUDA);

  // The batch is ordered before the consumer stream (the legacy default stream here).
  std::vector<float> values(8 * 12);
  std::vector<std::int64_t> labels(8);
  GPUFEED_CUDA_TRY(cudaMemcpy(values.data(), x.data, values.size() * sizeof(float), cudaMemcpyDeviceToHost));
  GPUFEED_CUDA_TRY(cudaMemcpy(labels.data(), t.labels->dl_tensor.data, labels.size() * 8, cudaMemcpyDeviceToHost));
  for (std::size_t r = 0; r < 8; ++r) {
    for (std::size_t k = 0; k < 12; ++k) CHECK(values[r * 12 + k] == value_of(indices[r], k));
    CHECK(labels[r] == label_of(indices[r]));
  }
  CHECK_THROWS_AS((void)feed.next(), config_error);  // still held
  t.labels->deleter(t.labels);
  std::thread([m = t.data] { m->deleter(m); }).join();
  std::set<std::uint64_t> seen(indices.begin(), indices.end());
  while (auto next = feed.next())
    for (const auto i : next->host_indices()) CHECK(seen.insert(i).second);
  CHECK(seen.size() == gpufeed::test::rows);
}
