// gpufeed::detail — applying the loader's error policy to a batch whose reads partly failed.
#pragma once

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "gpufeed/batch.hpp"
#include "gpufeed/loader_config.hpp"
#include "gpufeed/detail/loader/slot_layout.hpp"
#include "gpufeed/detail/loader/types.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::loading {

inline std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

// The input name a failure's gpufeed::error carries (error_context::input), or "".
inline std::string input_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const error& x) {
    return x.input();
  } catch (...) {
    return {};
  }
}

// Sorts the slot's failures by position and sets slot.error when they fail the batch as a whole:
// the first fatal one (a record transform's bug) under every policy, else the first one under
// throw_error. True when it did.
inline bool batch_failed(staging_slot& slot, error_policy policy) {
  auto& failures = slot.failures;
  if (failures.empty()) return false;
  std::sort(failures.begin(), failures.end(),
            [](const record_failure& a, const record_failure& b) { return a.position < b.position; });
  for (const auto& f : failures)
    if (f.fatal) {
      slot.error = f.error;
      return true;
    }
  if (policy == error_policy::throw_error) {
    slot.error = failures.front().error;
    return true;
  }
  return false;
}

// A slot's arrays and which of its records failed, as apply_error_policy and pack_bounded
// (record_stage.hpp) rewrite the slot through them: both report each failure the same way and
// end their compaction the same way.
struct slot_records {
  std::uint64_t* idx;
  std::int64_t* lab;
  std::uint64_t* off;
  std::byte* data;
  std::size_t n;             // records planned into the slot
  std::vector<char> failed;  // failed[k]: record k's read or transform failed

  slot_records(staging_slot& slot, const slot_layout& layout)
      : idx(slot_layout::indices(slot.buffer.data(), layout)),
        lab(slot_layout::labels(slot.buffer.data(), layout)),
        off(slot_layout::offsets(slot.buffer.data(), layout)),
        data(slot_layout::data(slot.buffer.data(), layout)),
        n(slot.meta.records),
        failed(n, 0) {
    for (const auto& f : slot.failures) failed[f.position] = 1;
  }

  // What failure f reports; called before the compaction moves its record's index.
  [[nodiscard]] skipped_record skipped(const staging_slot& slot, const record_failure& f) const {
    skipped_record r;
    r.index = idx[f.position];
    r.epoch = slot.meta.epoch;
    r.batch = slot.meta.number;
    r.what = describe(f.error);
    r.input = input_of(f.error);
    return r;
  }

  // Ends a compaction that kept w records in `bytes` bytes.
  void packed(staging_slot& slot, std::size_t w, std::uint64_t bytes) const {
    off[w] = bytes;
    slot.meta.records = w;
    slot.meta.data_bytes = bytes;
  }
};

// Rewrites the slot in place so that it holds only delivered records, and returns what was
// dropped or replaced. When the failures fail the batch (batch_failed) it sets slot.error
// instead and changes nothing else. Called by the one worker that completed the batch.
inline std::vector<skipped_record> apply_error_policy(staging_slot& slot, const slot_layout& layout,
                                                      error_policy policy) {
  std::vector<skipped_record> out;
  if (slot.failures.empty() || batch_failed(slot, policy)) return out;
  const auto& failures = slot.failures;
  slot_records records(slot, layout);
  auto& [idx, lab, off, data, n, failed] = records;

  std::vector<char> drop(n, 0);
  for (const auto& f : failures) {
    skipped_record r = records.skipped(slot, f);
    const std::size_t p = f.position;
    const std::uint64_t size = off[p + 1] - off[p];
    std::optional<std::size_t> donor;
    if (policy == error_policy::substitute) {
      // Nearest good record of the same size, earlier first (deterministic).
      for (std::size_t d = 1; d < n && !donor; ++d) {
        if (p >= d && !failed[p - d] && off[p - d + 1] - off[p - d] == size) donor = p - d;
        else if (p + d < n && !failed[p + d] && off[p + d + 1] - off[p + d] == size) donor = p + d;
      }
    }
    if (donor) {
      std::memcpy(data + off[p], data + off[*donor], size);
      lab[p] = lab[*donor];
      idx[p] = idx[*donor];
      r.substituted = true;
      r.substitute_index = idx[*donor];
    } else {
      drop[p] = 1;
    }
    out.push_back(std::move(r));
  }

  // Compact the kept records forward (destinations never pass sources).
  std::size_t w = 0;
  std::uint64_t cursor = 0;
  for (std::size_t r = 0; r < n; ++r) {
    const std::uint64_t b = off[r], e = off[r + 1];
    if (drop[r]) continue;
    if (cursor != b) std::memmove(data + cursor, data + b, e - b);
    idx[w] = idx[r];
    lab[w] = lab[r];
    off[w] = cursor;
    cursor += e - b;
    ++w;
  }
  records.packed(slot, w, cursor);
  return out;
}

}  // namespace gpufeed::detail::loading
