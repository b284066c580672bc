// gpufeed — the bound on what an HDF5 dataset may declare against the size of its file, applied
// before gpufeed allocates what was declared (a record, blob offsets and labels read whole, a
// decoded chunk).
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

// The most bytes a dataset of a file of `file_size` bytes may declare for what gpufeed holds in
// memory (a record; a chunk, decoded whole; blob offsets and labels, which are read whole): 4096
// times the file (deflate expands at most ~1032-fold; the spare covers stronger codecs), and at
// least 64 MiB, so that a small crafted file cannot make gpufeed allocate terabytes before
// anything is read.
inline std::uint64_t declared_bytes_limit(std::uint64_t file_size) noexcept {
  constexpr std::uint64_t floor = std::uint64_t{64} << 20;
  const std::uint64_t scaled =
      file_size > (std::numeric_limits<std::uint64_t>::max() >> 12) ? ~std::uint64_t{0}
                                                                      : file_size << 12;
  return scaled > floor ? scaled : floor;
}

// format_error naming file and dataset when `bytes` (what `what` of `name` declares) is past
// declared_bytes_limit.
inline void check_declared(std::uint64_t bytes, std::uint64_t file_size, const std::string& file,
                           const std::string& name, const std::string& what) {
  const std::uint64_t limit = declared_bytes_limit(file_size);
  if (bytes > limit)
    format_fail("dataset '" + name + "' declares " + what + " of " + std::to_string(bytes) +
                    " bytes, more than a file of " + std::to_string(file_size) +
                    " bytes can hold (limit " + std::to_string(limit) +
                    " bytes: 4096 x the file size, at least 64 MiB): damaged or crafted",
                file);
}

}  // namespace gpufeed::detail::hdf5
