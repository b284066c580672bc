// gpufeed — the byte-extent index of a dataset's storage, and the choice of read path.
//
// Contiguous storage: H5Dget_offset gives the address of element 0; record bytes follow
// row-major. Chunked storage: for each chunk, H5Dget_chunk_storage_size and H5Dread_chunk under
// a capture of index_driver give its address, stored size and filter mask with one index lookup
// each (1.10.8's H5Dget_chunk_info[_by_coord] scan every chunk per call, which is quadratic, and
// H5Dchunk_iter is not in 1.10.8: see index_driver.hpp). Anything else — a filter gpufeed does
// not decode, a type HDF5 must convert, chunks never written (HDF5 supplies the fill value) — is
// read through H5Dread, with the reason recorded. The filter pipeline is read by
// filter_pipeline.hpp.
#pragma once

#include <hdf5.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/declared_limits.hpp"
#include "gpufeed/detail/hdf5/dtype.hpp"
#include "gpufeed/detail/hdf5/filter_pipeline.hpp"
#include "gpufeed/detail/hdf5/index_driver.hpp"
#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

// More chunks than this are not indexed (24 bytes each): the shard falls back to H5Dread.
inline constexpr std::uint64_t max_indexed_chunks = std::uint64_t{1} << 26;

inline std::string coords_text(const coords& c, int rank) {
  std::string t = "(";
  for (int d = 0; d < rank; ++d) t += (d ? ", " : "") + std::to_string(c[d]);
  return t + ")";
}

// Fills s.grid, s.chunks and s.chunks_per_record. Returns a fallback reason or "".
inline std::string index_chunks(shard_index& s, hid_t dset, hid_t dcpl, const std::string& file) {
  std::array<hsize_t, max_rank> cdims{};
  const int crank = H5Pget_chunk(dcpl, max_rank, cdims.data());
  if (crank != s.rank) throw_hdf5("cannot read the chunk shape", file, "H5Pget_chunk", crank);
  chunk_grid& g = s.grid;
  g.rank = s.rank;
  g.element_size = s.element_size;
  std::uint64_t bytes = s.element_size, count = 1;
  for (int d = 0; d < s.rank; ++d) {
    if (cdims[d] == 0) format_fail("chunk shape has a zero dimension", file);
    g.dims[d] = s.dims[d];
    g.chunk[d] = cdims[d];
    s.description.chunk_shape.push_back(cdims[d]);
    if (__builtin_mul_overflow(bytes, std::uint64_t{cdims[d]}, &bytes))
      format_fail("chunk size overflows", file);
    const std::uint64_t along = s.dims[d] == 0 ? 0 : (s.dims[d] - 1) / cdims[d] + 1;
    if (__builtin_mul_overflow(count, along, &count)) count = max_indexed_chunks + 1;
  }
  // A chunk is decoded whole: its size is bounded like a record's (declared_limits.hpp).
  check_declared(bytes, s.file.size(), file, s.dataset_name, "a chunk");
  if (count > max_indexed_chunks)
    return std::to_string(count) + " chunks: more than gpufeed indexes";
  // Each written chunk holds a byte of the file at least: with more chunks than the file has
  // bytes some were never written, and the shard falls back before a table of them is built.
  if (count > s.file.size())
    return std::to_string(count) + " chunks in a file of " + std::to_string(s.file.size()) +
           " bytes: not all were written (HDF5 supplies the fill value)";
  g.finish();

  if (s.blob) {
    const std::uint64_t per = s.max_record / g.chunk[0] + 2;
    s.chunks_per_record = per < g.chunk_count ? per : g.chunk_count;
  } else {
    s.chunks_per_record = 1;
    for (int d = 1; d < s.rank; ++d) s.chunks_per_record *= g.grid[d];
    s.rows = row_plan::of(g, s.dims);
  }

  s.chunks.resize(static_cast<std::size_t>(g.chunk_count));
  coords pos{};
  std::array<hsize_t, max_rank> offset{};
  std::unique_ptr<unsigned char[]> sink;  // H5Dread_chunk's buffer: the driver never fills it
  std::size_t sink_size = 0;
  raw_read_capture seen;
  for (std::uint64_t k = 0; k < g.chunk_count; ++k) {
    coords origin{};
    for (int d = 0; d < s.rank; ++d) origin[d] = offset[d] = pos[d] * g.chunk[d];
    hsize_t stored = 0;
    if (H5Dget_chunk_storage_size(dset, offset.data(), &stored) < 0 || stored == 0) {
      rethrow_driver_fault(file, "cannot read the chunk index");
      take_error_stack();
      std::vector<chunk_entry>().swap(s.chunks);  // freed, not only emptied
      return "the chunk at " + coords_text(origin, s.rank) +
             " was never written: HDF5 supplies the fill value";
    }
    // An unfiltered chunk must hold exactly chunk_bytes: checked before any read of it, so a
    // damaged size fails here even when the shard then falls back to H5Dread (whose copy of a
    // short unfiltered chunk over-reads the heap in libhdf5 1.10.8).
    if (s.pipeline.empty() && stored != g.chunk_bytes)
      format_fail("unfiltered chunk at " + coords_text(origin, s.rank) + " holds " +
                      std::to_string(stored) + " bytes, expected " + std::to_string(g.chunk_bytes),
                  file);
    if (stored > s.file.size())
      format_fail("the chunk at " + coords_text(origin, s.rank) + " declares " +
                      std::to_string(stored) + " stored bytes, more than the file holds (" +
                      std::to_string(s.file.size()) + " bytes)",
                  file);
    if (stored > sink_size) {
      sink.reset(new unsigned char[static_cast<std::size_t>(stored)]);
      sink_size = static_cast<std::size_t>(stored);
    }
    std::uint32_t mask = 0;
    herr_t rc = 0;
    {
      capture_scope arm(seen);
      rc = H5Dread_chunk(dset, H5P_DEFAULT, offset.data(), &mask, sink.get());
    }
    if (rc < 0) {
      // The index lists this chunk but HDF5 cannot read it (e.g. a v1 B-tree entry whose
      // address lies past the end of the file): H5Dread would fail every record of the chunk
      // too, so the shard is refused here, as a chunk past the end is on the pread path.
      rethrow_driver_fault(file, "cannot read the chunk at " + coords_text(origin, s.rank));
      throw_hdf5<format_error>("the chunk at " + coords_text(origin, s.rank) +
                                   " is listed in the chunk index but cannot be read "
                                   "(damaged index or truncated file)",
                               file, "H5Dread_chunk", rc);
    }
    if (seen.reads != 1 || seen.size != stored) {  // not the single raw read expected
      rethrow_driver_fault(file, "cannot read the chunk at " + coords_text(origin, s.rank));
      std::vector<chunk_entry>().swap(s.chunks);
      return "the file extent of the chunk at " + coords_text(origin, s.rank) +
             " could not be determined";
    }
    const std::uint64_t addr = seen.address, size = seen.size;
    if (addr > s.file.size() || size > s.file.size() - addr)
      format_fail("chunk bytes [" + std::to_string(addr) + ", " + std::to_string(addr + size) +
                      ") lie past the end of the file (" + std::to_string(s.file.size()) +
                      " bytes): truncated or damaged",
                  file);
    chunk_entry& c = s.chunks[static_cast<std::size_t>(k)];
    c.address = addr;
    c.size = size;
    c.filter_mask = mask;
    if (s.unfiltered(c) && size != g.chunk_bytes)
      format_fail("unfiltered chunk holds " + std::to_string(size) + " bytes, expected " +
                      std::to_string(g.chunk_bytes),
                  file);
    for (int d = s.rank - 1; d >= 0; --d) {  // next grid position, row-major
      if (++pos[d] < g.grid[d]) break;
      pos[d] = 0;
    }
  }
  return {};
}

// A contiguous or compact dataset's stored size must be what its shape and file type need, and
// contiguous bytes must lie inside the file — checked for every such dataset, those read through
// H5Dread too: libhdf5 1.10.8 trusts the layout message, and its H5Dread over-reads the heap
// (H5VM_memcpyvv) when the stored size or address is damaged (found by fuzz_hdf5_open).
inline void check_stored_extent(const shard_index& s, hid_t dset, bool compact,
                                const std::string& file) {
  const haddr_t addr = compact ? 0 : H5Dget_offset(dset);
  if (addr == HADDR_UNDEF) {  // never written: HDF5 reads the fill value, not the file
    take_error_stack();
    return;
  }
  handle ftype = checked(H5Dget_type(dset), H5Tclose, "H5Dget_type", "no datatype", file);
  std::uint64_t need = H5Tget_size(ftype.get());
  for (int d = 0; d < s.rank; ++d)
    if (__builtin_mul_overflow(need, s.dims[d], &need)) format_fail("dataset size overflows", file);
  const std::uint64_t stored = H5Dget_storage_size(dset);
  if (stored != need)
    format_fail(std::string(compact ? "compact" : "contiguous") + " storage holds " +
                    std::to_string(stored) + " bytes; the shape and type need " +
                    std::to_string(need) + ": damaged",
                file);
  if (!compact && (addr > s.file.size() || need > s.file.size() - addr))
    format_fail("dataset bytes [" + std::to_string(addr) + ", " + std::to_string(addr + need) +
                    ") lie past the end of the file (" + std::to_string(s.file.size()) +
                    " bytes): truncated or damaged",
                file);
}

// The chunk checker of a chunked shard read through H5Dread (fallback_check.hpp): the chunk
// grid with the file type's element size, and the whole filter pipeline.
inline std::unique_ptr<chunk_checker> make_checker(shard_index& s, hid_t dset, hid_t dcpl,
                                                   const std::string& file) {
  std::array<hsize_t, max_rank> cdims{};
  const int crank = H5Pget_chunk(dcpl, max_rank, cdims.data());
  if (crank != s.rank) throw_hdf5("cannot read the chunk shape", file, "H5Pget_chunk", crank);
  handle ftype = checked(H5Dget_type(dset), H5Tclose, "H5Dget_type", "no datatype", file);
  chunk_grid g;
  g.rank = s.rank;
  g.element_size = H5Tget_size(ftype.get());
  std::uint64_t bytes = g.element_size;
  for (int d = 0; d < s.rank; ++d) {
    if (cdims[d] == 0) format_fail("chunk shape has a zero dimension", file);
    g.dims[d] = s.dims[d];
    g.chunk[d] = cdims[d];
    if (__builtin_mul_overflow(bytes, std::uint64_t{cdims[d]}, &bytes))
      format_fail("chunk size overflows", file);
  }
  check_declared(bytes, s.file.size(), file, s.dataset_name, "a chunk");
  g.finish();
  return std::make_unique<chunk_checker>(g, s.pipeline);
}

// Decides the read path and builds the index. The caller holds a library_lock.
inline void index_storage(shard_index& s, hid_t dset, const dtype_info& dt,
                          const std::string& file) {
  handle dcpl = checked(H5Dget_create_plist(dset), H5Pclose, "H5Dget_create_plist",
                        "cannot read the creation properties", file);
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  const int externals = H5Pget_external_count(dcpl.get());
  std::string& storage = s.description.storage;
  std::string reason;
  switch (layout) {
    case H5D_COMPACT:
      storage = "compact";
      reason = "compact storage: the data lives in the object header";
      break;
    case H5D_VIRTUAL:
      storage = "virtual";
      reason = "virtual dataset: the data lives in other datasets";
      break;
    case H5D_CHUNKED:
      storage = "chunked";
      break;
    case H5D_CONTIGUOUS:
      storage = externals > 0 ? "external" : "contiguous";
      if (externals > 0)
        reason =
            "external storage: the data lives in " + std::to_string(externals) + " other file(s)";
      break;
    default:
      throw_hdf5("unknown storage layout", file, "H5Pget_layout", layout);
  }
  if ((layout == H5D_CONTIGUOUS && externals == 0) || layout == H5D_COMPACT)
    check_stored_extent(s, dset, layout == H5D_COMPACT, file);
  if (layout == H5D_CHUNKED) {
    const std::string filters = read_pipeline(s, dcpl.get(), file);
    if (reason.empty()) reason = filters;
  }
  if (reason.empty() && !dt.exact) reason = "datatype: " + dt.not_exact_why;

  if (reason.empty() && s.description.data_bytes == 0) {  // nothing to read, nothing to index
    s.kind = layout == H5D_CHUNKED ? read_kind::chunked : read_kind::contiguous;
    if (layout == H5D_CHUNKED) reason = index_chunks(s, dset, dcpl.get(), file);
  } else if (reason.empty() && layout == H5D_CONTIGUOUS) {
    const haddr_t addr = H5Dget_offset(dset);
    const std::uint64_t bytes = s.description.data_bytes;
    if (addr == HADDR_UNDEF) {
      take_error_stack();
      reason = "storage never written: HDF5 supplies the fill value";
    } else if (addr > s.file.size() || bytes > s.file.size() - addr) {
      format_fail("dataset bytes [" + std::to_string(addr) + ", " + std::to_string(addr + bytes) +
                      ") lie past the end of the file (" + std::to_string(s.file.size()) +
                      " bytes): truncated or damaged",
                  file);
    } else {
      s.kind = read_kind::contiguous;
      s.base = addr;
    }
  } else if (reason.empty() && layout == H5D_CHUNKED) {
    s.kind = read_kind::chunked;
    reason = index_chunks(s, dset, dcpl.get(), file);
  }
  if (!reason.empty()) {
    s.kind = read_kind::fallback;
    std::vector<chunk_entry>().swap(s.chunks);
    s.rows = row_plan{};
    s.description.fallback_reason = reason;
    if (layout == H5D_CHUNKED) s.checker = make_checker(s, dset, dcpl.get(), file);
  }
}

}  // namespace gpufeed::detail::hdf5
