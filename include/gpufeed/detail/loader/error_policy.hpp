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

namespace gpufeed::detail {

inline std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
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

// Rewrites the slot in place so that it holds only delivered records, and returns what was
// dropped or replaced. When the failures fail the batch (batch_failed) it sets slot.error
// instead and changes nothing else. Called by the one worker that completed the batch.
inline std::vector<skipped_record> apply_error_policy(staging_slot& slot, const slot_layout& layout,
                                                      error_policy policy) {
  std::vector<skipped_record> out;
  if (slot.failures.empty() || batch_failed(slot, policy)) return out;
  const auto& failures = slot.failures;
  std::byte* base = slot.buffer.data();
  std::uint64_t* idx = slot_layout::indices(base, layout);
  std::int64_t* lab = slot_layout::labels(base, layout);
  std::uint64_t* off = slot_layout::offsets(base, layout);
  std::byte* data = slot_layout::data(base, layout);
  const std::size_t n = slot.meta.records;
  std::vector<char> failed(n, 0);
  for (const auto& f : failures) failed[f.position] = 1;

  std::vector<char> drop(n, 0);
  for (const auto& f : failures) {
    skipped_record r;
    r.index = idx[f.position];
    r.epoch = slot.meta.epoch;
    r.batch = slot.meta.number;
    r.what = describe(f.error);
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
  off[w] = cursor;
  slot.meta.records = w;
  slot.meta.data_bytes = cursor;
  return out;
}

}  // namespace gpufeed::detail
