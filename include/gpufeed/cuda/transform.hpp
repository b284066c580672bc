// gpufeed::cuda — the hook through which the loader runs GPU transforms on a batch.
//
// After a batch's host-to-device copy, and before the batch is handed to the consumer, the loader
// calls each transform with a view of the batch in device memory and the pipeline stream that
// the copy was queued on. A transform is any callable
//
//     void(device_batch_view& batch, cudaStream_t stream)
//
// (the device_transform concept below). Its contract:
//   - Stream-ordered: it queues its work on `stream` (kernels, cudaMemcpyAsync, CUB calls) and
//     returns. Work on `stream` already sees the batch's bytes; later work on `stream` (the
//     loader's "ready" event, the next transform) sees what the transform wrote.
//   - Never synchronises the host (no cudaStreamSynchronize, cudaDeviceSynchronize, synchronous
//     cudaMemcpy, cudaMalloc or cudaFree): the call runs on the pipeline's thread while other
//     batches are in flight, and a host wait there stalls every stream.
//   - Never allocates per call in steady state: size scratch once, at construction.
//   - Reads and writes only the batch's memory and its own; keeps no pointer into the batch after
//     it returns (the slot is reused for another batch once the consumer releases it).
//   - Reports bad arguments by throwing a gpufeed::error (config_error for settings that cannot
//     work with this batch); the loader delivers it with the batch it broke. Checks that need
//     the batch's contents run on the device and are reported through device memory (see
//     pad.cuh's pad_status).
//   - May change `batch.output_bytes` (and `data`/`bytes` to point at `output` for a transform
//     whose output feeds the next one) to say how much it produced.
//
// Host-compilable: this header declares no kernels and may be included by .cpp files.
#pragma once

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace gpufeed::cuda {

// One batch in device memory, as the loader hands it to a transform. Every pointer is device
// memory (or null where stated); the loader owns all of it.
struct device_batch_view {
  std::byte* data = nullptr;                // the batch's records, packed back to back
  std::size_t bytes = 0;                    // bytes valid at data
  const std::uint64_t* offsets = nullptr;   // records + 1 byte offsets into data, record i being
                                            // data[offsets[i], offsets[i+1]); null when every
                                            // record has record_bytes bytes
  std::size_t records = 0;                  // records in the batch (B)
  std::size_t record_bytes = 0;             // bytes per record; 0 when records vary in size
  std::byte* output = nullptr;              // where the transform writes its result; may be null
                                            // for a transform that works in place
  std::size_t output_bytes = 0;             // capacity at output
};

// A transform the loader can call: see the contract at the top of this file.
template <class F>
concept device_transform = std::invocable<F&, device_batch_view&, cudaStream_t>;

// The type-erased form the loader stores. std::function needs a copyable callable: capture
// move-only owners (padder) by reference or pointer and keep them alive as long as the loader.
using transform_hook = std::function<void(device_batch_view&, cudaStream_t)>;

static_assert(device_transform<transform_hook>);

}  // namespace gpufeed::cuda
