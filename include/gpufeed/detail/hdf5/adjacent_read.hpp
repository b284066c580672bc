// gpufeed::detail::hdf5 — a run of adjacent records of a contiguous dataset read with one call.
// Records local, local + 1, ... of a contiguous dataset (fixed rows, or blob records whose
// offsets follow each other) lie back to back in the file, so one scatter read (preadv for a posix_file) moves the whole run
// into the records' places, wherever those are: the per-record cost of a read (the system call,
// locating and pinning the shard) is paid once per run instead of once per record.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/filters.hpp"
#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

// True when shard s's records are adjacent in its file in index order (one range per run).
inline bool reads_adjacent(const shard_index& s) noexcept {
  return s.kind == read_kind::contiguous;
}

// Reads records local .. local + dst.size() - 1 of shard s (they exist; reads_adjacent(s)) into
// dst[0], dst[1], ...; each dst[j] holds exactly that record's bytes (config_error otherwise,
// naming the record). `global` is the first record's index in the source, for errors; `iov` is
// the caller's scratch. Buffers that follow each other in memory are read as one.
inline void read_adjacent(const shard_index& s, std::uint64_t local, std::uint64_t global,
                          std::span<const std::span<std::byte>> dst, std::vector<iovec>& iov) {
  iov.clear();
  std::uint64_t bytes = 0;
  for (std::size_t j = 0; j < dst.size(); ++j) {
    const std::size_t n = s.record_bytes(local + j);
    if (dst[j].size() != n) {
      error_context ctx;
      ctx.file = s.path;
      ctx.record = global + j;
      throw config_error("a run's destination for record " + std::to_string(global + j) +
                             " holds " + std::to_string(dst[j].size()) + " bytes; the record has " +
                             std::to_string(n),
                         std::move(ctx));
    }
    if (n == 0) continue;
    if (!iov.empty() && static_cast<std::byte*>(iov.back().iov_base) + iov.back().iov_len ==
                            dst[j].data())
      iov.back().iov_len += n;
    else
      iov.push_back(iovec{dst[j].data(), n});
    bytes += n;
  }
  if (bytes == 0) return;
  const std::uint64_t at = s.blob ? s.offsets[local] : local * s.row_bytes;
  s.file.read_scatter(iov, s.base + at, global);
  if (s.swap)
    for (const auto& d : dst) byteswap_elements(d.data(), d.size(), s.element_size);
}

}  // namespace gpufeed::detail::hdf5
