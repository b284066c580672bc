// gpufeed::detail — the data the loader's stages hand each other. A batch's description is the
// batch_meta of gpufeed/batch_view.hpp, carried as is from the staging slot to the ready entry.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <vector>

#include "gpufeed/batch.hpp"
#include "gpufeed/batch_view.hpp"
#include "gpufeed/memory.hpp"

namespace gpufeed::detail::loading {

struct record_failure {
  std::size_t position;  // within the batch
  std::exception_ptr error;
  bool fatal = false;    // fails the whole batch under every policy (a record transform's bug)
};

// A host slot the planner plans a batch into and the workers read its records into.
struct staging_slot {
  resource_buffer buffer;
  batch_meta meta;
  std::atomic<std::size_t> pending{0};  // tasks not yet done
  std::mutex failure_mutex;
  std::vector<record_failure> failures;
  std::exception_ptr error;  // the batch failed as a whole (planning, transform, throw policy)
  // Bounded record transforms: output k's size, written by the worker that ran record k.
  std::vector<std::uint64_t> output_sizes;
  // pipeline_setup::sorted_tasks: the batch's positions in record order (rotated per batch);
  // each task reads a range of it, written by the planner before the tasks are queued.
  std::vector<std::size_t> read_order;
  // Decode ahead: the mark of the windows the batch reads, which its workers pass to
  // window_read_ahead::reading() before they read (0: none).
  std::uint64_t reads_mark = 0;
  // Device decode: the batch's records were all read on the host after some failed there (the
  // error policy rewrites host memory), so the device gathers none of them.
  bool host_only = false;
};

// A batch that is ready for next(): delivered in target slot `slot`, or failed with `error`
// (then it owns no slot).
struct ready_entry {
  batch_meta meta;
  std::size_t slot = 0;
  bool has_slot = false;
  std::exception_ptr error;
  std::vector<skipped_record> skipped;
};

// Records [begin, end) of the batch in staging slot `slot`; or, with slot ==
// decode_ahead_task, the units in slots [begin, end) of window `window` of epoch `epoch`, to
// decode ahead (read_ahead.hpp); or, with stage_ahead, those units staged for the device by the
// batch in `slot` (one of its tasks: decoded with it).
inline constexpr std::size_t decode_ahead_task = static_cast<std::size_t>(-1);
struct chunk_task {
  std::size_t slot = 0, begin = 0, end = 0;
  std::uint64_t epoch = 0, window = 0;
  bool stage_ahead = false;
};

}  // namespace gpufeed::detail::loading
