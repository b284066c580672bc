// gpufeed — the vocabulary of remote units (unit_reads.hpp): their size, what one object may hold
// and fetch ahead, a unit's extent, and how a loader's order reads them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpufeed::detail::remote {

// A remote unit: 4 MiB. An object store's first byte costs tens of milliseconds, so a request
// must move MiBs to spend most of its time moving bytes (AWS names 8 or 16 MB as typical ranged
// GETs); larger units coarsen block_shuffled's order: its default 128 MiB window shuffles 32
// units of 4 MiB together, 8 of 16 MiB.
inline constexpr std::uint64_t fetch_unit_bytes = std::uint64_t{4} << 20;
// Bytes one object's units may hold: two windows (the one being read and the one read ahead) of
// the default 128 MiB, with room for the look-ahead; spent units leave long before.
inline constexpr std::size_t unit_hold_bytes = std::size_t{512} << 20;
// Read-ahead requests in flight per object: an object store serves each connection at a bounded
// rate, so a window is fetched ahead over several at once.
inline constexpr std::size_t ahead_requests = 4;

// Bytes [begin, end) of a source fetched as one unit, of which `need` will be read.
struct unit_extent {
  std::uint64_t begin = 0, end = 0, need = 0;
};

// How units are read, as the loader's order says (hdf5_source::plan_reads):
//   each_read   shuffled: every read goes to the object alone (a unit per record would fetch
//               each unit once per record);
//   windows     block_shuffled, and reads without a loader: units fetched whole, ahead only as
//               will_need advises (the next window);
//   sequential  units fetched whole, and a read that enters the unit after the last one entered
//               queues the next ahead_requests units for read-ahead (a file's read-ahead).
enum class unit_mode : unsigned char { each_read, windows, sequential };

}  // namespace gpufeed::detail::remote
