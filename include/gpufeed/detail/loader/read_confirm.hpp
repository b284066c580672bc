// gpufeed::detail — the last step of a worker's task: confirming its reads (confirming_reader,
// source.hpp). A record whose read does not stand (its shard's memory map was truncated while
// the task read it) becomes a failure of that record for the error policy, like any read error,
// before the batch can be delivered.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <vector>

#include "gpufeed/detail/loader/types.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::detail::loading {

// Switches a confirming_reader from confirming each read itself to confirm_task_reads().
template <class Reader>
void confirm_per_task(Reader& reader) noexcept {
  if constexpr (confirming_reader<Reader>) reader.confirm_later();
}

// Confirms the reads of a task whose slot positions are at(j), j in [0, n), with record indices
// idx[]; for each position whose read does not stand and that has not failed already, adds a
// failure (fatal = false) to slot.failures, counts it in `failures` and returns the sum of
// bytes_of(k) over them (the caller's count of bytes read drops by it). 0 when every read
// stands, or for a reader that confirms nothing.
template <class Reader, class At, class BytesOf>
std::uint64_t confirm_task_reads(Reader& reader, staging_slot& slot, std::size_t n, At&& at,
                                 const std::uint64_t* idx, BytesOf&& bytes_of,
                                 std::uint64_t& failures) {
  if constexpr (!confirming_reader<Reader>) {
    return 0;
  } else {
    if (reader.confirm_reads()) return 0;
    std::vector<std::size_t> failed_already;  // rare path: the task's earlier failures
    {
      std::lock_guard lock(slot.failure_mutex);
      for (const record_failure& f : slot.failures) failed_already.push_back(f.position);
    }
    std::sort(failed_already.begin(), failed_already.end());
    std::uint64_t dropped = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t k = at(j);
      if (std::binary_search(failed_already.begin(), failed_already.end(), k)) continue;
      try {
        reader.confirm(idx[k]);
      } catch (...) {
        ++failures;
        dropped += bytes_of(k);
        std::lock_guard lock(slot.failure_mutex);
        slot.failures.push_back(record_failure{k, std::current_exception()});
      }
    }
    return dropped;
  }
}

}  // namespace gpufeed::detail::loading
