// gpufeed::detail — a worker's reads of one task's records straight into their places in the
// staging slot (the loader without a per-record transform; record_stage.hpp is the stage with
// one). A record that fails is recorded in slot.failures for the error policy; nothing throws
// out of a record's read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <span>
#include <vector>

#include "gpufeed/detail/loader/read_confirm.hpp"
#include "gpufeed/detail/loader/slot_layout.hpp"
#include "gpufeed/detail/loader/types.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail::loading {

// Reads records [begin, end) of `slot` (laid out as `l`) with `reader`; returns the bytes read
// and adds the records that failed to `failures`. With `order` (pipeline_setup::sorted_tasks:
// the batch's positions in record order) the task is the range [begin, end) of it, started at
// this worker's own offset (worker w of `workers`): workers whose tasks overlap in units do not
// reach them in the same order and queue behind each other's decodes. A record whose chunk
// another worker is decoding is left for the end of the task (deferring_reader, kept in `late`):
// the worker reads the task's other records meanwhile. Records that follow each other in
// reading order go to a run_reader as one run (a failed run is read again record by record).
// Last, a confirming_reader confirms the task's reads (read_confirm.hpp).
template <class Reader>
std::uint64_t read_records(Reader& reader, staging_slot& slot, const slot_layout& l,
                           std::size_t begin, std::size_t end, const std::size_t* order,
                           std::size_t w, std::size_t workers, std::vector<std::size_t>& late,
                           std::uint64_t& failures) {
  std::byte* base = slot.buffer.data();
  const std::uint64_t* idx = slot_layout::indices(base, l);
  const std::uint64_t* off = slot_layout::offsets(base, l);
  std::byte* data = slot_layout::data(base, l);
  std::uint64_t bytes = 0;
  // Runs of adjacent records (run_reader): their places, at most max_run per call.
  constexpr std::size_t max_run = 1024;
  std::vector<std::span<std::byte>> run;
  late.clear();
  confirm_per_task(reader);
  auto failed = [&](std::size_t k, std::exception_ptr e) {
    ++failures;
    std::lock_guard lock(slot.failure_mutex);
    slot.failures.push_back(record_failure{k, std::move(e)});
  };
  auto read_one = [&](std::size_t k) {
    try {
      const std::span<std::byte> dst(data + off[k], off[k + 1] - off[k]);
      if constexpr (deferring_reader<Reader>) {
        if (!reader.try_read(idx[k], dst)) {
          late.push_back(k);
          return;
        }
      } else {
        reader.read(idx[k], dst);
      }
      bytes += off[k + 1] - off[k];
    } catch (...) {
      failed(k, std::current_exception());
    }
  };
  // The task's positions in reading order: k = at(j), j in [0, n).
  const std::size_t n = end - begin;
  const std::size_t from = order ? w % workers * n / workers : 0;
  const auto at = [&](std::size_t j) {
    return order ? order[begin + (from + j) % n] : begin + j;
  };
  for (std::size_t j = 0; j < n;) {
    if constexpr (run_reader<Reader>) {
      // Positions whose records follow each other (sequential order; block_shuffled's sorted
      // tasks): one read_run call for the run, into their places in the slot.
      std::size_t m = 1;
      while (j + m < n && m < max_run && idx[at(j + m)] == idx[at(j)] + m) ++m;
      if (m >= 2) {
        run.clear();
        for (std::size_t r = 0; r < m; ++r) {
          const std::size_t k = at(j + r);
          run.emplace_back(data + off[k], off[k + 1] - off[k]);
        }
        std::size_t got = 0;
        try {
          got = reader.read_run(idx[at(j)], std::span<const std::span<std::byte>>(run));
        } catch (...) {
          got = 0;  // read one by one below: each failure names its own record
        }
        for (std::size_t r = 0; r < got; ++r) bytes += run[r].size();
        if (got > 0) {
          j += got;
          continue;
        }
        for (std::size_t r = 0; r < m; ++r) read_one(at(j + r));
        j += m;
        continue;
      }
    }
    read_one(at(j));
    ++j;
  }
  if constexpr (deferring_reader<Reader>) {
    for (const std::size_t k : late) {
      try {
        reader.finish_deferred(idx[k], std::span(data + off[k], off[k + 1] - off[k]));
        bytes += off[k + 1] - off[k];
      } catch (...) {
        failed(k, std::current_exception());
      }
    }
  }
  bytes -= confirm_task_reads(reader, slot, n, at, idx,
                              [&](std::size_t k) { return off[k + 1] - off[k]; }, failures);
  return bytes;
}

}  // namespace gpufeed::detail::loading
