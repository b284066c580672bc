// gpufeed::detail — the byte layout of one batch slot.
//
// Metadata first, then the records, so that one H2D copy of [0, data_offset + data_bytes) moves a
// whole batch — labels, indices and offsets included — and never the unused tail of the slot:
//   [indices: B x u64][labels: B x i64][offsets: (B+1) x u64][pad to 256][data: capacity bytes]
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpufeed::detail::loading {

struct slot_layout {
  std::size_t batch_size = 0;
  std::size_t data_capacity = 0;

  static constexpr std::size_t data_alignment = 256;  // CUDA's allocation granularity for loads

  [[nodiscard]] constexpr std::size_t indices_offset() const noexcept { return 0; }
  [[nodiscard]] constexpr std::size_t labels_offset() const noexcept { return batch_size * 8; }
  [[nodiscard]] constexpr std::size_t offsets_offset() const noexcept { return batch_size * 16; }
  [[nodiscard]] constexpr std::size_t data_offset() const noexcept {
    const std::size_t meta = batch_size * 16 + (batch_size + 1) * 8;
    return (meta + data_alignment - 1) / data_alignment * data_alignment;
  }
  [[nodiscard]] constexpr std::size_t slot_bytes() const noexcept {
    return data_offset() + data_capacity;
  }

  static std::uint64_t* indices(std::byte* slot, const slot_layout& l) noexcept {
    return reinterpret_cast<std::uint64_t*>(slot + l.indices_offset());
  }
  static std::int64_t* labels(std::byte* slot, const slot_layout& l) noexcept {
    return reinterpret_cast<std::int64_t*>(slot + l.labels_offset());
  }
  static std::uint64_t* offsets(std::byte* slot, const slot_layout& l) noexcept {
    return reinterpret_cast<std::uint64_t*>(slot + l.offsets_offset());
  }
  static std::byte* data(std::byte* slot, const slot_layout& l) noexcept {
    return slot + l.data_offset();
  }
};

}  // namespace gpufeed::detail::loading
