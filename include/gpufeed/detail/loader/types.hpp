// gpufeed::detail — the data the loader's stages hand each other.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory_resource>
#include <mutex>
#include <vector>

#include "gpufeed/batch.hpp"
#include "gpufeed/detail/loader/slot_layout.hpp"
#include "gpufeed/memory.hpp"
#include "gpufeed/sampler.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed::detail {

struct pipeline_config {
  std::size_t workers = 1, prefetch = 1, streams = 1, max_held = 2;
  std::size_t chunk_records = 16;
  // Cut worker tasks where the source's decode unit changes (decode_unit_source, sequential
  // order, automatic task size): a task runs on past chunk_records to the end of its unit.
  bool unit_tasks = false;
  std::uint64_t epochs = 0;  // 0 = unlimited
  slot_layout layout;
  std::size_t record_bytes = 0;  // fixed size, 0 when variable
  std::size_t output_bytes = 0;
  bool labels = false;
  error_policy policy = error_policy::throw_error;
  stream_handle consumer = nullptr;
  transform_hook hook;
  std::pmr::memory_resource* staging = nullptr;  // nullptr: the target's default
  std::size_t trace_capacity = 0;                // timeline events per track; 0 = off
  sampler_state start;
};

struct record_failure {
  std::size_t position;  // within the batch
  std::exception_ptr error;
};

struct host_slot {
  resource_buffer buffer;
  std::uint64_t sequence = 0;
  sampler_state at;  // (seed, epoch, batch number)
  bool last_in_epoch = false;
  std::size_t records = 0, data_bytes = 0;
  std::atomic<std::size_t> pending{0};
  std::mutex failure_mutex;
  std::vector<record_failure> failures;
  std::exception_ptr error;  // the batch failed as a whole (planning, transform, throw policy)
};

struct ready_entry {
  std::size_t host = 0;      // host slot (host target; none once the batch has failed)
  std::size_t device = 0;    // device slot (device target)
  bool has_device = false;
  std::uint64_t sequence = 0;
  sampler_state at;
  bool last_in_epoch = false;
  std::size_t records = 0, data_bytes = 0;
  std::exception_ptr error;
  std::vector<skipped_record> skipped;
};

struct chunk_task {
  std::size_t slot = 0, begin = 0, end = 0;
};

}  // namespace gpufeed::detail
