// gpufeed::detail — what the planner does to one batch, as functions testable alone: lay out
// its indices, labels and offsets in a staging slot, and cut it into worker tasks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/detail/loader/slot_layout.hpp"
#include "gpufeed/detail/loader/types.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail::loading {

// Fills `slot` (whose meta names the epoch and the round's global position) with the batch's indices, labels
// and offsets, and sets meta.records and meta.data_bytes. Throws config_error when the records
// do not fit the slot.
template <source Source>
void plan_batch(const Source& src, const pipeline_setup& p, staging_slot& slot) {
  std::byte* base = slot.buffer.data();
  const slot_layout l = p.layout();
  std::uint64_t* idx = slot_layout::indices(base, l);
  std::int64_t* lab = slot_layout::labels(base, l);
  std::uint64_t* off = slot_layout::offsets(base, l);
  batch_meta& m = slot.meta;
  m.records = p.order.batch(sampler_state{p.start.seed, m.epoch, m.position},
                            std::span(idx, l.batch_size));
  // Each record's place: its fixed size, or a record transform's bound (the workers write
  // record k at k x bound; record_stage.hpp packs them once their sizes are known).
  const std::size_t each = p.record_bytes ? p.record_bytes : p.config.per_record.output_bytes();
  std::uint64_t cursor = 0;
  for (std::size_t k = 0; k < m.records; ++k) {
    off[k] = cursor;
    cursor += each ? each : src.record_size(idx[k]);
    if (p.labels) {
      if constexpr (labeled_source<Source>) lab[k] = src.label(idx[k]);
    } else {
      lab[k] = 0;
    }
  }
  off[m.records] = cursor;
  if (cursor > l.data_capacity)
    throw config_error("batch " + std::to_string(m.number) + " of epoch " +
                       std::to_string(m.epoch) + " needs " + std::to_string(cursor) +
                       " bytes but a slot holds " + std::to_string(l.data_capacity) +
                       " (raise slot_data_bytes)");
  m.data_bytes = cursor;
}

// pipeline_setup::tasks_fill_records: sets the batch's meta.records, meta.data_bytes and every
// record's offset (a stride: each task reads its last record's end, which is the next task's
// first offset, so the offsets cannot be left to the tasks), leaving each record's index and
// label to fill_task_records(). Throws config_error as plan_batch() does.
inline void plan_batch_shape(const pipeline_setup& p, staging_slot& slot) {
  const slot_layout l = p.layout();
  batch_meta& m = slot.meta;
  const sampler_state at{p.start.seed, m.epoch, m.position};
  const std::uint64_t n = p.order.batch_records(at);
  if (n == 0 || n > l.batch_size) {  // batch() words the error
    std::uint64_t none = 0;
    (void)p.order.batch(at, std::span(&none, 0));
  }
  m.records = static_cast<std::size_t>(n);
  const std::uint64_t bytes = n * p.record_bytes;
  if (bytes > l.data_capacity)
    throw config_error("batch " + std::to_string(m.number) + " of epoch " +
                       std::to_string(m.epoch) + " needs " + std::to_string(bytes) +
                       " bytes but a slot holds " + std::to_string(l.data_capacity) +
                       " (raise slot_data_bytes)");
  std::uint64_t* off = slot_layout::offsets(slot.buffer.data(), l);
  for (std::uint64_t k = 0; k <= n; ++k) off[k] = k * p.record_bytes;
  m.data_bytes = bytes;
}

// pipeline_setup::tasks_fill_records: the indices and labels plan_batch() writes for positions
// [begin, end) of the batch planned by plan_batch_shape(), written by the worker task that reads
// them (each task writes only its own positions). Labels
// are read from the source here, so a label the source cannot give fails the task's batch.
template <source Source>
void fill_task_records(const Source& src, const pipeline_setup& p, staging_slot& slot,
                       std::size_t begin, std::size_t end) {
  std::byte* base = slot.buffer.data();
  const slot_layout l = p.layout();
  std::uint64_t* idx = slot_layout::indices(base, l);
  std::int64_t* lab = slot_layout::labels(base, l);
  const batch_meta& m = slot.meta;
  p.order.batch_part(sampler_state{p.start.seed, m.epoch, m.position}, begin,
                     std::span(idx + begin, end - begin));
  for (std::size_t k = begin; k < end; ++k) {
    if (p.labels) {
      if constexpr (labeled_source<Source>) lab[k] = src.label(idx[k]);
    } else {
      lab[k] = 0;
    }
  }
}

// The worker tasks of the `n` records at `idx` (staging slot `s`), into `out`: `step` positions
// each, or with `unit_tasks`, at least that many and on while the next record shares the last
// one's decode unit (at most 8 x step, so a huge unit still spreads over workers; each decodes
// it once). Units are asked for only past `step`: two calls per task where no run continues.
template <source Source>
void split_tasks(const Source& src, std::size_t s, const std::uint64_t* idx, std::size_t n,
                 std::size_t step, bool unit_tasks, std::vector<chunk_task>& out) {
  out.clear();
  for (std::size_t begin = 0; begin < n;) {
    std::size_t end = std::min(n, begin + step);
    if constexpr (decode_unit_source<Source>) {
      if (unit_tasks && end < n) {
        const std::uint64_t unit = src.decode_unit(idx[end - 1]);
        const std::size_t cap = std::min(n, begin + 8 * step);
        while (end < cap && src.decode_unit(idx[end]) == unit) ++end;
      }
    } else {
      (void)src;
      (void)idx;
      (void)unit_tasks;
    }
    out.push_back(chunk_task{s, begin, end});
    begin = end;
  }
}

}  // namespace gpufeed::detail::loading
