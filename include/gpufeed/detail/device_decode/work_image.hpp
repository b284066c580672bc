// gpufeed::detail::device_decode — what one batch asks of the device when its records are
// decoded there (docs/design.md, "GPU decode in the loader"): the compressed bytes of the units
// it stages, the units (detail/codec/gpu_units.hpp) that decode them into the device cache, and
// the runs that gather its records from the cache into the batch. All of it lies in pinned host
// memory, copied to the device with the batch. Host only: no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpufeed/detail/codec/gpu_units.hpp"

namespace gpufeed::detail::device_decode {

// One copy of decoded bytes into a batch: `len` bytes at `src` in the device cache to `dst` in
// the batch's data (the slot's data region, detail/loader/slot_layout.hpp).
struct gather_run {
  std::uint64_t src = 0;
  std::uint64_t dst = 0;
  std::uint64_t len = 0;
};

// One batch's device work. Unit offsets: `src` into `compressed`, `dst` and `stage` into the
// device cache (a unit's stage lies in its own cache place, docs/design.md). Spans may be empty.
struct work_image {
  const std::byte* compressed = nullptr;
  std::size_t compressed_bytes = 0;
  const codec::gpu_unit* units = nullptr;
  std::size_t unit_count = 0;
  const gather_run* runs = nullptr;
  std::size_t run_count = 0;
  // Where the batch's data region starts in its target slot: runs' `dst` count from there, and
  // a run must end within the slot (the engine refuses it on the device otherwise).
  std::size_t data_offset = 0;
};

// What a source whose records can be decoded on a device (source.hpp, device_decoding_source)
// tells the loader to size the device cache and the batches' work areas: its units' device
// place (decoded bytes plus stage, hdf5/device_stage.hpp), their largest stored size and their
// records. place_bytes 0: none of its records decode on a device.
struct device_units {
  std::uint64_t place_bytes = 0;
  std::uint64_t stored_bytes = 0;   // compressed bytes of the largest unit
  std::uint64_t unit_records = 0;   // records per unit (rows per band; blob: the mean)
  std::uint64_t units = 0;          // units of the source
  std::uint64_t record_runs = 0;    // gather runs one record needs, at most
};

// Unit status words the device writes back (cuda/detail/codec: unit_status): 0 is success.
inline constexpr std::uint32_t unit_ok = 0;
// The gather's word, after the units' in unit_decoder::statuses(): unit_ok, or this when a run
// reached past the device cache or past the slot. Such a run is not copied (nothing outside the
// cache is read, nothing outside the slot written); the batch's other runs are.
inline constexpr std::uint32_t gather_out_of_range = 0x100;

}  // namespace gpufeed::detail::device_decode
