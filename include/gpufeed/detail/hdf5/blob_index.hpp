// gpufeed — validation of a blob shard's offsets (pure: no I/O, no HDF5; fuzzed by
// tests/fuzz/fuzz_blob_index.cpp).
//
// Blob layout: record i is data[offsets[i] .. offsets[i+1]) of a 1-D uint8 dataset, so N records
// need N+1 offsets. A valid index has at least one entry, starts at 0, never decreases, and ends
// exactly at the data length: every byte of `data` belongs to exactly one record, and a missing
// or extra final entry is caught because the last offset would not match the data length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>

namespace gpufeed::detail::hdf5 {

struct blob_index_problem {
  std::size_t entry = 0;                // the offsets entry at fault (the first one found)
  std::optional<std::uint64_t> record;  // the record whose byte range it breaks, if one does
  std::string message;
};

// Empty when `offsets` is a valid index into `data_length` bytes, else the first problem.
// O(N), no allocation unless there is a problem.
inline std::optional<blob_index_problem> validate_blob_offsets(
    std::span<const std::uint64_t> offsets, std::uint64_t data_length) {
  auto problem = [](std::size_t entry, std::optional<std::uint64_t> record, std::string message) {
    return std::optional<blob_index_problem>(blob_index_problem{entry, record, std::move(message)});
  };
  if (offsets.empty())
    return problem(0, std::nullopt,
                   "the offsets dataset is empty; N records need N+1 offsets (at least 1)");
  if (offsets[0] != 0)
    return problem(0, 0, "offsets[0] is " + std::to_string(offsets[0]) + ", expected 0");
  for (std::size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1])
      return problem(i, i - 1,
                     "offsets decrease at entry " + std::to_string(i) + " (" +
                         std::to_string(offsets[i - 1]) + " then " + std::to_string(offsets[i]) +
                         ")");
    if (offsets[i] > data_length)
      return problem(i, i - 1,
                     "offsets[" + std::to_string(i) + "] = " + std::to_string(offsets[i]) +
                         " points past the end of the data (" + std::to_string(data_length) +
                         " bytes)");
  }
  if (offsets.back() != data_length)
    return problem(offsets.size() - 1, std::nullopt,
                   "the last offset (entry " + std::to_string(offsets.size() - 1) + ") is " +
                       std::to_string(offsets.back()) + " but the data has " +
                       std::to_string(data_length) +
                       " bytes: offsets must have N+1 entries and cover all the data");
  return std::nullopt;
}

}  // namespace gpufeed::detail::hdf5
