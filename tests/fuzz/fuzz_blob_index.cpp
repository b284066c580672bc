// libFuzzer target: the blob offsets validation (detail::hdf5::validate_blob_offsets) must accept
// exactly the valid indexes, and every index it accepts must keep all records inside the data.
//
// Input: byte 0 picks an encoding.
//   even: bytes 1..8 = data length (little-endian), then offsets as little-endian uint64s
//   odd:  bytes 1..2 = signed adjustment of the data length, then one byte per offset: a delta
//         from the previous offset (0xff = one less than the previous offset, i.e. a decrease);
//         bit 1 of byte 0 starts the offsets at 1 instead of 0. Reaches valid indexes easily.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpufeed/detail/hdf5/blob_index.hpp"

namespace {

[[noreturn]] void violated() { std::abort(); }

void decode(const std::uint8_t* data, std::size_t size, std::vector<std::uint64_t>& offsets,
            std::uint64_t& length) {
  const std::uint8_t mode = data[0];
  if (mode % 2 == 0) {
    length = 0;
    for (std::size_t b = 0; b < 8 && 1 + b < size; ++b)
      length |= static_cast<std::uint64_t>(data[1 + b]) << (8 * b);
    for (std::size_t at = 9; at + 8 <= size; at += 8) {
      std::uint64_t v = 0;
      std::memcpy(&v, data + at, 8);  // tests run on little-endian hosts
      offsets.push_back(v);
    }
    return;
  }
  std::int16_t adjust = 0;
  if (size >= 3) adjust = static_cast<std::int16_t>(data[1] | (data[2] << 8));
  std::uint64_t at = (mode & 2) ? 1 : 0;
  offsets.push_back(at);
  for (std::size_t k = 3; k < size; ++k) {
    at = data[k] == 0xff ? at - 1 : at + data[k];  // wraps below 0 on purpose
    offsets.push_back(at);
  }
  length = offsets.back() + static_cast<std::uint64_t>(static_cast<std::int64_t>(adjust));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::vector<std::uint64_t> offsets;
  std::uint64_t length = 0;
  decode(data, size, offsets, length);

  bool valid = !offsets.empty() && offsets.front() == 0 && offsets.back() == length;
  for (std::size_t i = 0; valid && i < offsets.size(); ++i)
    valid = offsets[i] <= length && (i == 0 || offsets[i] >= offsets[i - 1]);

  const auto problem = gpufeed::detail::hdf5::validate_blob_offsets(offsets, length);
  if (valid != !problem) violated();
  if (problem) {
    if (problem->message.empty()) violated();
    if (!offsets.empty() && problem->entry >= offsets.size()) violated();
    if (problem->record && *problem->record >= offsets.size()) violated();
    return 0;
  }
  // Accepted: every record is a range inside the data, and together they cover it exactly.
  std::uint64_t total = 0;
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    if (offsets[i + 1] < offsets[i] || offsets[i + 1] > length) violated();
    total += offsets[i + 1] - offsets[i];
  }
  if (total != length) violated();
  return 0;
}
