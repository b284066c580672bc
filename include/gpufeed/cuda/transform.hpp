// gpufeed::cuda — the hook through which the loader runs GPU transforms on a batch.
//
// After a batch's host-to-device copy, and before the batch is handed to the consumer, the loader
// calls its transform hook (loader_config::transform) with a view of the batch in device memory
// (gpufeed::batch_view, target.hpp) and the pipeline stream that the copy was queued on. A
// transform is any callable
//
//     void(const gpufeed::batch_view& batch, cudaStream_t stream)
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
//   - Writes its result to `batch.output` (loader_config::transform_output_bytes per batch);
//     the consumer reads it through batch::output().
//
// Host-compilable: this header declares no kernels and may be included by .cpp files.
#pragma once

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "gpufeed/target.hpp"

namespace gpufeed::cuda {

// The loader's view of a batch on a device target: every pointer is device memory.
using device_batch_view = ::gpufeed::batch_view;

// A transform the loader can call: see the contract at the top of this file.
template <class F>
concept device_transform = std::invocable<F&, const device_batch_view&, cudaStream_t>;

// The type-erased form the loader stores (loader_config::transform). std::function needs a
// copyable callable: capture move-only owners (padder) by reference or pointer and keep them
// alive as long as the loader.
using transform_hook = ::gpufeed::transform_hook;

static_assert(device_transform<transform_hook>);

}  // namespace gpufeed::cuda
