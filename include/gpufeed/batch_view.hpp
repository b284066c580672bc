// gpufeed — the one description of a batch: batch_meta (what it is) and batch_view (where it
// lies). The planner fills a batch_meta in its slot, the ready queue carries it, a transform hook
// sees it as a batch_view and gpufeed::batch exposes it; a new per-batch field goes here, once.
//
// A leaf header (no gpufeed includes), so that detail/ code and public headers both name it.
// Streams cross the host/CUDA boundary as stream_handle: cudaStream_t is `CUstream_st*`, and
// declaring the struct here lets host code pass a user's stream through without the CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

struct CUstream_st;

namespace gpufeed {

// A cudaStream_t without the CUDA headers. nullptr is CUDA's legacy default stream.
using stream_handle = CUstream_st*;

// What a batch is: its place in the sampler's order and its size.
struct batch_meta {
  std::uint64_t epoch = 0;
  std::uint64_t number = 0;    // this rank's batch within the epoch
  std::uint64_t position = 0;  // the epoch's global position where this batch's round starts
  std::uint64_t sequence = 0;  // since the loader started
  bool last_in_epoch = false;
  std::size_t records = 0;
  std::size_t data_bytes = 0;    // packed record bytes
  std::size_t record_bytes = 0;  // fixed record size, 0 when records vary
  std::size_t output_bytes = 0;  // the transform output buffer's size (0: none)
  bool on_device = false;        // the pointers below are device memory
};

// Where a batch lies: pointers in the target's memory (device memory on a device target). A
// transform hook's view is valid for the duration of the call; work the hook queues on the stream
// it is given is ordered after the batch's copy and before the consumer may touch the batch.
struct batch_view : batch_meta {
  std::byte* data = nullptr;               // packed records
  const std::uint64_t* offsets = nullptr;  // records + 1 byte offsets into data
  const std::int64_t* labels = nullptr;    // null when the source has none
  const std::uint64_t* indices = nullptr;  // global record indices
  std::byte* output = nullptr;             // the transform output buffer (may be null)
};

// Runs on the pipeline after a batch is in the target's memory: on a device target, on the copy
// stream (queue kernels there, never synchronise); on the host target, on the worker thread
// that completed the batch, with stream == nullptr. An exception fails that batch.
using transform_hook = std::function<void(const batch_view&, stream_handle)>;

}  // namespace gpufeed
