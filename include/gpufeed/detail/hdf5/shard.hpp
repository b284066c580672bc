// gpufeed — one opened HDF5 shard: what open_shard() learned about it (byte extents, filters,
// record geometry, labels) and the H5Dread fallback for the layouts gpufeed does not read itself.
#pragma once

#include <hdf5.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/fallback_check.hpp"
#include "gpufeed/detail/hdf5/filter_step.hpp"
#include "gpufeed/detail/hdf5/geometry.hpp"
#include "gpufeed/detail/hdf5/index_driver.hpp"
#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/detail/hdf5/record_plan.hpp"
#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/hdf5_options.hpp"

namespace gpufeed::detail::hdf5 {

enum class read_kind {
  contiguous,  // one pread at base + the record's byte offset
  chunked,     // pread of the chunks a record touches, decoded by gpufeed when filtered
  fallback,    // H5Dread of the record's hyperslab under the library mutex
};

// One stored chunk: its file extent and which filters were skipped when it was written
// (bit k set = pipeline filter k was not applied, as HDF5's filter_mask says).
struct chunk_entry {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  std::uint32_t filter_mask = 0;
};

struct shard_index {
  std::string path;
  // The shard's bytes (io/byte_source.hpp; open_shard gives it an io::posix_file unless told
  // another reader). Mutable: source_state's shard_lru closes and reopens it (never while pinned).
  mutable io::owned_source file;
  bool blob = false;
  read_kind kind = read_kind::contiguous;
  std::size_t element_size = 1;
  bool swap = false;  // reverse each element's bytes after reading
  std::uint64_t records = 0;
  std::size_t row_bytes = 0;   // fixed layout: bytes of one record
  std::size_t max_record = 0;  // largest record in bytes
  int rank = 0;
  coords dims{};                        // extent of the data dataset
  std::vector<std::uint64_t> offsets;   // blob: records + 1 entries, validated
  std::vector<std::int64_t> labels;     // empty without a label dataset
  std::uint64_t base = 0;               // contiguous: file offset of the first element
  chunk_grid grid;                      // chunked
  std::vector<chunk_entry> chunks;      // chunked: one per grid position, row-major
  std::vector<filter_step> pipeline;    // chunked: filters in the order they were applied
  std::uint64_t chunks_per_record = 0;  // chunked: the most chunks one record touches
  row_plan rows;                        // chunked, fixed layout: every row's chunks and runs
  // A shard named by a URL whose data is fetched in remote units (remote_units.hpp): a unit's
  // extent along dimension 0 (rows for fixed, bytes for blob); 0 when reads are not in units.
  std::uint64_t remote_band = 0;
  // Fallback only (closed after indexing otherwise). Mutable: a failed H5Dread closes and
  // reopens them (see fallback_read), under the library mutex.
  mutable handle h5file, dataset;
  handle memtype;
  std::string dataset_name;            // fallback: the dataset to reopen
  mutable bool fallback_stale = false;  // fallback: the last H5Dread failed; reopen first
  // Fallback of a chunked dataset: checks each chunk before H5Dread decodes it
  // (fallback_check.hpp). Used under the library mutex only.
  mutable std::unique_ptr<chunk_checker> checker;
  hdf5_shard_info description;          // what hdf5_source::shards() reports for this shard

  [[nodiscard]] std::size_t record_bytes(std::uint64_t local) const noexcept {
    return blob ? static_cast<std::size_t>(offsets[local + 1] - offsets[local]) : row_bytes;
  }

  [[nodiscard]] record_box box(std::uint64_t local) const noexcept {
    record_box b;
    if (blob) {
      b.start[0] = offsets[local];
      b.count[0] = offsets[local + 1] - offsets[local];
    } else {
      b.start[0] = local;
      b.count[0] = 1;
      for (int d = 1; d < rank; ++d) b.count[d] = dims[d];
    }
    return b;
  }

  // True when chunk c has no filter left to undo (none in the pipeline, or all skipped).
  [[nodiscard]] bool unfiltered(const chunk_entry& c) const noexcept {
    for (std::size_t k = 0; k < pipeline.size() && k < 32; ++k)
      if (!(c.filter_mask & (1u << k))) return false;
    return true;
  }

  // Reads record `local` through H5Dread with the native memory type (HDF5 converts and
  // decodes). Serialised by the library mutex: correct, not fast. io_error naming file and
  // record when the OS failed a read or the file shrank; corrupt_error when a chunk of the
  // record does not decode to its size (checked by gpufeed before HDF5 sees it); library_error
  // for other HDF5 failures.
  //
  // After any failed H5Dread the file and dataset are closed and reopened before the next read:
  // libhdf5 (1.10.8 at least) keeps the bytes of a failed read in the file's sieve buffer and
  // would serve the next records from it (stale bytes, no error).
  void fallback_read(std::uint64_t local, std::span<std::byte> dst, std::uint64_t global) const {
    const record_box b = box(local);
    std::uint64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= b.count[d];
    if (n == 0) return;
    std::array<hsize_t, max_rank> start{}, count{};
    for (int d = 0; d < rank; ++d) {
      start[d] = static_cast<hsize_t>(b.start[d]);
      count[d] = static_cast<hsize_t>(b.count[d]);
    }
    library_lock lock;
    clear_driver_fault();
    if (fallback_stale) reopen(global);
    auto fail = [&](const char* api) {
      fallback_stale = true;
      throw_hdf5("H5Dread fallback failed", path, api, -1, global);
    };
    if (checker) {
      try {
        checker->check_box(dataset.get(), file.source(), b, global);
      } catch (...) {
        fallback_stale = true;  // H5Dread_chunk may have left the chunk's bytes in HDF5's caches
        throw;
      }
    }
    handle fspace(H5Dget_space(dataset.get()), H5Sclose);
    if (!fspace.valid()) fail("H5Dget_space");
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr) < 0)
      fail("H5Sselect_hyperslab");
    handle mspace(H5Screate_simple(rank, count.data(), nullptr), H5Sclose);
    if (!mspace.valid()) fail("H5Screate_simple");
    if (H5Dread(dataset.get(), memtype.get(), mspace.get(), fspace.get(), H5P_DEFAULT, dst.data()) <
        0)
      fail("H5Dread");
  }

 private:
  // Closes the dataset and the file (dropping HDF5's caches of them) and opens them again
  // through index_driver. The caller holds a library_lock. On failure fallback_stale stays set.
  void reopen(std::uint64_t global) const {
    dataset.reset();
    h5file.reset();
    take_error_stack();
    handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    const hid_t driver = index_driver::id();
    if (!fapl.valid() || driver < 0 || H5Pset_driver(fapl.get(), driver, nullptr) < 0)
      throw_hdf5("cannot reopen the shard after a failed read", path, "H5Pset_driver", -1, global);
    h5file = handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
    if (!h5file.valid())
      throw_hdf5<io_error>("cannot reopen the shard (after a failed read, or closed by "
                           "hdf5_options::max_open_shards; truncated or replaced since?)",
                           path, "H5Fopen", -1, global);
    dataset = handle(H5Dopen2(h5file.get(), dataset_name.c_str(), H5P_DEFAULT), H5Dclose);
    if (!dataset.valid())
      throw_hdf5<io_error>("cannot reopen dataset '" + dataset_name + "' after a failed read", path,
                 "H5Dopen2", -1, global);
    fallback_stale = false;
  }
};

}  // namespace gpufeed::detail::hdf5
