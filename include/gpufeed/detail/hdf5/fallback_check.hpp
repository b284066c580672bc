// gpufeed — checking a chunk before H5Dread decodes it (shards read through the fallback).
//
// libhdf5 (1.10.8 at least) does not check that a chunk's filters decode to the chunk's size:
// when a filtered chunk decodes to fewer bytes, H5Dread copies the chunk's rows from past the
// end of the decoded buffer (heap bytes delivered as records), and the filter plugins themselves
// crash on parameters or headers gpufeed's decoders refuse (Bitshuffle element size 0, LZ4 and
// Bitshuffle headers declaring gigabytes). So before H5Dread first touches a chunk, gpufeed reads
// its stored bytes (where H5Dread_chunk would read them) and undoes every filter itself, with its own decoders: the
// chunk must decode to exactly its size (chunk shape x element size), each compressor's stream
// must be complete and valid, and an unfiltered chunk must hold exactly its size. Otherwise
// corrupt_error naming file, record and chunk, and HDF5 never sees the chunk.
//
// A chunk passes once per shard (remembered by its grid index). A chunk never written is not
// checked (HDF5 supplies the fill value). A chunk with an active filter gpufeed does not decode
// (nbit, scaleoffset, szip, other plugins) is left to HDF5: nothing here can decode it.
#pragma once

#include <hdf5.h>
#include <zstd.h>

#include <array>
#include <blosc.h>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gpufeed/detail/byte_buffer.hpp"
#include "gpufeed/detail/hdf5/chunk_decoders.hpp"
#include "gpufeed/detail/hdf5/filter_step.hpp"
#include "gpufeed/detail/hdf5/filters.hpp"
#include "gpufeed/detail/hdf5/geometry.hpp"
#include "gpufeed/detail/hdf5/index_driver.hpp"
#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

class chunk_checker {
 public:
  // grid: the dataset's chunk grid with the FILE type's element size; steps: every filter of the
  // pipeline in the order applied (`other` for those gpufeed does not decode).
  chunk_checker(chunk_grid grid, std::vector<filter_step> steps)
      : grid_(std::move(grid)), steps_(std::move(steps)) {}

  // Checks every chunk of `box` not checked before. The caller holds a library_lock; dataset is
  // the open dataset. corrupt_error (file, record) for a chunk that does not decode to its size.
  void check_box(hid_t dataset, const io::byte_source& f, const record_box& box,
                 std::uint64_t global) {
    for_each_chunk(grid_, box, [&](std::uint64_t k, const coords& g) {
      if (checked_.count(k)) return;
      if (check(dataset, f, g, global)) checked_.insert(k);
    });
  }

 private:
  // The most bytes an intermediate filter's output may have (the stored form of the filters
  // applied before it: a compressor's output can exceed its input by a little only).
  [[nodiscard]] std::size_t intermediate_limit() const noexcept {
    return 2 * grid_.chunk_bytes + 65536;
  }

  [[noreturn]] void corrupt(const coords& g, const std::string& file, std::uint64_t global,
                            const std::string& what, const char* api) const {
    coords origin{};
    for (int d = 0; d < grid_.rank; ++d) origin[d] = g[d] * grid_.chunk[d];
    std::string where = "(";
    for (int d = 0; d < grid_.rank; ++d) where += (d ? ", " : "") + std::to_string(origin[d]);
    error_context ctx;
    ctx.file = file;
    ctx.record = global;
    ctx.api = api;
    throw corrupt_error(what + " in the chunk at " + where +
                            ") (checked before H5Dread: the chunk is not handed to HDF5)",
                        std::move(ctx));
  }

  // True when the chunk at grid position g decodes to its size (false: not checkable here, try again next time).
  bool check(hid_t dataset, const io::byte_source& data, const coords& g, std::uint64_t global) {
    const std::string& file = data.name();
    const std::uint64_t file_size = data.size();
    std::array<hsize_t, max_rank> offset{};
    for (int d = 0; d < grid_.rank; ++d) offset[d] = g[d] * grid_.chunk[d];
    hsize_t stored = 0;
    if (H5Dget_chunk_storage_size(dataset, offset.data(), &stored) < 0 || stored == 0) {
      take_error_stack();
      return false;  // never written (or HDF5 cannot find it: H5Dread reports that)
    }
    if (stored > file_size)
      corrupt(g, file, global,
              "the chunk index declares " + std::to_string(stored) +
                  " stored bytes, more than the file holds (" + std::to_string(file_size) + ")",
              "H5Dget_chunk_storage_size");
    // Where HDF5 reads the chunk from: H5Dread_chunk under a capture of index_driver (which
    // records the raw read instead of doing it). That extent, not the storage size asked above
    // (1.10.8 reports the chunk's nominal size for an unfiltered dataset whatever its index
    // entry says), is what H5Dread decodes; its bytes are then read here with pread.
    std::uint32_t mask = 0;
    raw_read_capture seen;
    herr_t rc = 0;
    {
      capture_scope arm(seen);
      rc = H5Dread_chunk(dataset, H5P_DEFAULT, offset.data(), &mask,
                         sink_.resize(static_cast<std::size_t>(stored)).data());
    }
    rethrow_driver_fault(file, "cannot read the chunk index", global);
    if (rc < 0)
      throw_hdf5<corrupt_error>("a chunk listed in the chunk index cannot be read", file,
                                "H5Dread_chunk", rc, global);
    if (seen.reads != 1)
      corrupt(g, file, global, "the file extent of the chunk cannot be determined",
              "H5Dread_chunk");
    if (seen.address > data.size() || seen.size > data.size() - seen.address)
      corrupt(g, file, global,
              "chunk bytes [" + std::to_string(seen.address) + ", +" +
                  std::to_string(seen.size) + ") lie past the end of the file (" +
                  std::to_string(data.size()) + " bytes)",
              "H5Dread_chunk");
    std::span<std::byte> raw = raw_.resize(static_cast<std::size_t>(seen.size));
    data.read_exact(raw.data(), raw.size(), seen.address, global);
    auto active = [&](std::size_t j) { return j >= 32 || !(mask & (1u << j)); };
    for (std::size_t j = 0; j < steps_.size(); ++j)
      if (active(j) && steps_[j].kind == codec::kind::other) return true;  // HDF5's to judge
    std::span<std::byte> cur = raw;
    for (std::size_t j = steps_.size(); j-- > 0;) {
      if (!active(j)) continue;
      const filter_step& f = steps_[j];
      if (f.kind == codec::kind::fletcher32) {
        if (!fletcher32_matches(cur.data(), cur.size()))
          corrupt(g, file, global, "fletcher32 checksum mismatch", "fletcher32");
        cur = cur.first(cur.size() - 4);
        continue;
      }
      // The output size: the chunk's (plus the fletcher32 trailers applied before) for the
      // first compressor applied; for a later one what its header records (bounded).
      std::size_t want = cur.size();
      bool unsized = false;  // a later deflate: its size is known once inflated
      if (compresses(f)) {
        bool inner = true;
        std::size_t trailers = 0;
        for (std::size_t i = 0; i < j; ++i) {
          if (!active(i)) continue;
          if (compresses(steps_[i])) inner = false;
          if (steps_[i].kind == codec::kind::fletcher32) trailers += 4;
        }
        want = inner ? grid_.chunk_bytes + trailers : outer_size(f, cur, g, file, global);
        unsized = !inner && f.kind == codec::kind::deflate;
      }
      std::span<std::byte> target = (cur.data() == a_.data() ? b_ : a_).resize(want);
      if (f.kind == codec::kind::shuffle) {
        unshuffle(cur.data(), target.data(), cur.size(), f.element_size);
      } else if (unsized) {
        std::size_t got = 0;  // deflate records no size: inflate into the bound
        const codec::result r = codecs_.decode_deflate(cur, target, &got);
        if (!r.ok) fail(r, g, file, global);
        target = target.first(got);
      } else if (const codec::result r = codecs_.decode(f, cur, target); !r.ok) {
        fail(r, g, file, global);
      }
      cur = target;
    }
    if (cur.size() != grid_.chunk_bytes)
      corrupt(g, file, global,
              "the chunk decodes to " + std::to_string(cur.size()) + " bytes, not its " +
                  std::to_string(grid_.chunk_bytes),
              "filter pipeline");
    return true;
  }

  [[noreturn]] void fail(const codec::result& r, const coords& g, const std::string& file,
                         std::uint64_t global) const {
    if (r.library_failed) {
      error_context ctx;
      ctx.file = file;
      ctx.record = global;
      ctx.api = r.api;
      throw library_error("decoder failed: " + r.message, std::move(ctx));
    }
    corrupt(g, file, global, r.message, r.api);
  }

  // The output size of a compressor that is not the first applied, from its own header (the
  // intermediate bound for deflate, which records none: inflated into it, the actual size
  // kept). corrupt_error past the bound or when the header does not say.
  std::size_t outer_size(const filter_step& f, std::span<const std::byte> src, const coords& g,
                         const std::string& file, std::uint64_t global) const {
    const std::size_t limit = intermediate_limit();
    std::uint64_t n = 0;
    switch (f.kind) {
      case codec::kind::deflate:
        return limit;
      case codec::kind::lz4:
      case codec::kind::bitshuffle:
        if (src.size() < 12) corrupt(g, file, global, "chunk shorter than its header", "header");
        n = codec::read_be64(src.data());
        // the form Debian's plugin writes in Zstd mode keeps the size (bitshuffle.hpp)
        if (f.kind == codec::kind::bitshuffle && f.compression == codec::bitshuffle_mode::zstd &&
            n > limit)
          n = src.size();
        break;
      case codec::kind::blosc: {
        if (src.size() < BLOSC_MIN_HEADER_LENGTH)
          corrupt(g, file, global, "chunk shorter than the Blosc header", "blosc filter");
        std::size_t nb = 0, cb = 0, bs = 0;
        blosc_cbuffer_sizes(src.data(), &nb, &cb, &bs);
        n = nb;
        break;
      }
      case codec::kind::zstd: {
        const unsigned long long z = ZSTD_getFrameContentSize(src.data(), src.size());
        if (z == ZSTD_CONTENTSIZE_ERROR || z == ZSTD_CONTENTSIZE_UNKNOWN)
          corrupt(g, file, global, "a zstd frame that does not record its decoded size",
                  "ZSTD_getFrameContentSize");
        n = z;
        break;
      }
      default:
        n = src.size();
    }
    if (n > limit)
      corrupt(g, file, global,
              "a filter's header declares " + std::to_string(n) + " decoded bytes, more than a " +
                  std::to_string(grid_.chunk_bytes) + "-byte chunk's stored form can hold",
              "filter pipeline");
    return static_cast<std::size_t>(n);
  }

  // chunk_decoders plus an inflate whose decoded size is not known in advance.
  struct decoders : chunk_decoders {
    codec::result decode_deflate(std::span<const std::byte> src, std::span<std::byte> dst,
                                 std::size_t* got) {
      return inflate_.decode(src, dst, got);
    }
    codec::deflate_decoder inflate_;
  };

  chunk_grid grid_;
  std::vector<filter_step> steps_;
  std::unordered_set<std::uint64_t> checked_;
  byte_buffer sink_, raw_, a_, b_;  // sink_: H5Dread_chunk's buffer (never filled)
  decoders codecs_;
};

}  // namespace gpufeed::detail::hdf5
