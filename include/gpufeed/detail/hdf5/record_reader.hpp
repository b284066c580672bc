// gpufeed — the hot path: reading one record of an indexed shard with pread, decoding filtered
// chunks in the calling thread, through the source's shared cache of decoded chunks
// (shared_chunk_cache.hpp).
//
// No HDF5 call happens here except for fallback shards. Bytes land in the caller's buffer
// directly when they can (contiguous data; an unfiltered chunk part that is one run; a chunk
// that is exactly one run of the record decodes straight into it); otherwise the chunk is
// decoded once into the shared cache and the record's runs are copied out, so all the records
// of one compressed chunk cost one decode, whichever worker reads them.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/byte_buffer.hpp"
#include "gpufeed/detail/hdf5/chunk_decoders.hpp"
#include "gpufeed/detail/hdf5/filters.hpp"
#include "gpufeed/detail/hdf5/geometry.hpp"
#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/detail/hdf5/shared_chunk_cache.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

// Test-only observation point: when set, called once per chunk decode (read and filters undone)
// with the shard and the chunk, from the decoding thread. Tests count decodes per chunk with it
// (each chunk decoded once per epoch in sequential order). Unset: one relaxed load per decoded
// chunk, nothing per record.
using chunk_decode_hook = void (*)(const shard_index&, const chunk_entry&) noexcept;
inline std::atomic<chunk_decode_hook> chunk_decode_observer{nullptr};

class record_reader {
 public:
  explicit record_reader(shared_chunk_cache& cache) : cache_(&cache) {}

  // Writes record `local` of shard s (global index `global`, for errors) to dst, which holds at
  // least s.record_bytes(local) bytes. `key_base` numbers s's chunks uniquely in the source.
  void read(const shard_index& s, std::uint64_t key_base, std::uint64_t local, std::uint64_t global,
            std::span<std::byte> dst) {
    const std::size_t n = s.record_bytes(local);
    switch (s.kind) {
      case read_kind::fallback:
        s.fallback_read(local, dst, global);
        return;
      case read_kind::contiguous: {
        const std::uint64_t at = s.blob ? s.offsets[local] : local * s.row_bytes;
        if (n) s.file.read_exact(dst.data(), n, s.base + at, global);
        break;
      }
      case read_kind::chunked:
        read_chunked(s, key_base, local, global, dst);
        cache_->count_record(n);
        break;
    }
    if (s.swap) byteswap_elements(dst.data(), n, s.element_size);
  }

  // Frees the scratch buffers when they hold more than `keep` bytes (the shared cache stays).
  void release(std::size_t keep = 0) noexcept {
    if (stored_.capacity() + a_.capacity() + b_.capacity() + own_.capacity() <= keep) return;
    stored_.release();
    a_.release();
    b_.release();
    own_.release();
  }

  // Records that read chunk g once per epoch: the rows (fixed) or the non-empty records (blob,
  // counted by their offsets) that overlap it along dimension 0. Records holding a whole chunk
  // never reach the cache, so they are not counted.
  static std::uint64_t chunk_users(const shard_index& s, const coords& g) noexcept {
    const std::uint64_t lo = g[0] * s.grid.chunk[0];
    const std::uint64_t hi = std::min(lo + s.grid.chunk[0], s.grid.dims[0]);
    if (hi <= lo) return 1;
    if (!s.blob) return hi - lo;
    const auto& o = s.offsets;  // records + 1 non-decreasing entries
    // first record ending after lo, last record starting before hi
    const auto first = std::upper_bound(o.begin() + 1, o.end(), lo) - (o.begin() + 1);
    const auto last = std::lower_bound(o.begin(), o.end() - 1, hi) - o.begin();
    std::uint64_t n = 0;
    for (auto r = static_cast<std::size_t>(first); r < static_cast<std::size_t>(last); ++r)
      n += o[r + 1] > o[r];
    return n ? n : 1;
  }

 private:
  void read_chunked(const shard_index& s, std::uint64_t key_base, std::uint64_t local,
                    std::uint64_t global, std::span<std::byte> dst) {
    const record_box box = s.box(local);
    // A record spanning several chunks pins every ready one under one lock (and unpins them
    // under one), instead of two lock round trips per chunk: h5py's automatic chunks put one
    // 16 KiB row over 64 chunks.
    held_keys_.clear();
    held_.clear();
    if (s.chunks_per_record > 1) {
      for_each_chunk(s.grid, box, [&](std::uint64_t k, const coords& g) {
        const chunk_entry& c = s.chunks[static_cast<std::size_t>(k)];
        const chunk_part part(s.grid, box, g);
        if (!(s.unfiltered(c) && part.runs() == 1) && !part.whole_chunk())
          held_keys_.push_back(key_base + k);
      });
      held_.resize(held_keys_.size());
      cache_->pin_ready(held_keys_, held_);
    }
    struct unpin_all {
      record_reader& r;
      ~unpin_all() {
        if (!r.held_keys_.empty()) r.cache_->unpin_ready(r.held_keys_, r.held_);
      }
    } unpin{*this};
    std::size_t next_held = 0;
    for_each_chunk(s.grid, box, [&](std::uint64_t k, const coords& g) {
      const chunk_entry& c = s.chunks[static_cast<std::size_t>(k)];
      const chunk_part part(s.grid, box, g);
      if (s.unfiltered(c) && part.runs() == 1) {  // straight from the file into the record
        part.for_each_run([&](std::size_t src, std::size_t at, std::size_t len) {
          s.file.read_exact(dst.data() + at, len, c.address + src, global);
        });
        return;
      }
      if (part.whole_chunk()) {  // the record holds the whole chunk: decode into it
        part.for_each_run([&](std::size_t, std::size_t at, std::size_t len) {
          decode(s, c, g, dst.subspan(at, len), global);
          cache_->count_direct_decode(len);
        });
        return;
      }
      auto copy_out = [&](const std::byte* bytes) {
        part.for_each_run([&](std::size_t src, std::size_t at, std::size_t len) {
          std::memcpy(dst.data() + at, bytes + src, len);
        });
      };
      if (next_held < held_.size()) {
        if (const std::byte* bytes = held_[next_held++]) return copy_out(bytes);
      }
      const shared_chunk_cache::pin held =
          cache_->get(key_base + k, s.grid.chunk_bytes, chunk_users(s, g), own_,
                      [&](std::span<std::byte> buf) { decode(s, c, g, buf, global); });
      copy_out(held.data());
    });
  }

  [[noreturn]] static void corrupt(const shard_index& s, const chunk_entry& c, const coords& g,
                                   std::uint64_t global, const std::string& what, const char* api,
                                   std::optional<long long> status = std::nullopt,
                                   std::string status_text = {}) {
    coords origin{};
    for (int d = 0; d < s.rank; ++d) origin[d] = g[d] * s.grid.chunk[d];
    std::string where = "(";
    for (int d = 0; d < s.rank; ++d) where += (d ? ", " : "") + std::to_string(origin[d]);
    error_context ctx;
    ctx.file = s.path;
    ctx.record = global;
    ctx.api = api;
    ctx.status = status;
    ctx.status_text = std::move(status_text);
    throw corrupt_error(what + " in the chunk at " + where + ") (file bytes [" +
                            std::to_string(c.address) + ", " + std::to_string(c.address + c.size) +
                            "))",
                        std::move(ctx));
  }

  // Reads chunk c and undoes its filters into `out` (exactly chunk_bytes long).
  void decode(const shard_index& s, const chunk_entry& c, const coords& g, std::span<std::byte> out,
              std::uint64_t global) {
    if (const auto hook = chunk_decode_observer.load(std::memory_order_relaxed)) hook(s, c);
    if (s.unfiltered(c)) {  // size == chunk_bytes, checked at open
      s.file.read_exact(out.data(), out.size(), c.address, global);
      return;
    }
    const int n = static_cast<int>(s.pipeline.size());
    auto active = [&](int k) { return !(c.filter_mask & (1u << k)); };
    int first = 0;  // the first filter applied when writing = the last one undone here
    while (!active(first)) ++first;

    std::span<std::byte> cur = stored_.resize(static_cast<std::size_t>(c.size));
    s.file.read_exact(cur.data(), cur.size(), c.address, global);
    for (int k = n - 1; k >= 0; --k) {
      if (!active(k)) continue;
      const filter_step& f = s.pipeline[static_cast<std::size_t>(k)];
      if (f.kind == filter_kind::fletcher32) {
        if (!fletcher32_matches(cur.data(), cur.size()))
          corrupt(s, c, g, global, "fletcher32 checksum mismatch", "fletcher32");
        cur = cur.first(cur.size() - 4);
        continue;
      }
      // a compressor's output is the chunk plus the checksums of fletcher32 filters applied
      // before it; shuffle and an uncompressed bitshuffle keep the size
      std::size_t want = cur.size();
      if (compresses(f)) {
        want = s.grid.chunk_bytes;
        for (int j = 0; j < k; ++j)
          if (active(j) && s.pipeline[static_cast<std::size_t>(j)].kind == filter_kind::fletcher32)
            want += 4;
      }
      std::span<std::byte> target;
      if (k == first) {
        if (want != out.size())
          corrupt(s, c, g, global,
                  "decoded size " + std::to_string(want) + " != chunk size " +
                      std::to_string(out.size()),
                  "filter pipeline");
        target = out;
      } else {
        target = (cur.data() == a_.data() ? b_ : a_).resize(want);
      }
      if (f.kind == filter_kind::shuffle) {
        unshuffle(cur.data(), target.data(), cur.size(), f.element_size);
      } else if (const codec::result r = codecs_.decode(f, cur, target); !r.ok) {
        if (r.library_failed) {  // the codec library itself failed, not the data
          error_context ctx;
          ctx.file = s.path;
          ctx.record = global;
          ctx.api = r.api;
          throw library_error("decoder failed: " + r.message, std::move(ctx));
        }
        corrupt(s, c, g, global, r.message, r.api);
      }
      cur = target;
    }
    if (cur.size() != out.size())
      corrupt(s, c, g, global,
              "decoded " + std::to_string(cur.size()) + " bytes, expected " +
                  std::to_string(out.size()),
              "filter pipeline");
    if (cur.data() != out.data()) std::memcpy(out.data(), cur.data(), out.size());
  }

  byte_buffer stored_, a_, b_;
  byte_buffer own_;  // a chunk decoded outside the cache (no room in its budget)
  std::vector<std::uint64_t> held_keys_;  // one record's chunks pinned by pin_ready, and their
  std::vector<const std::byte*> held_;     // bytes (null: not ready then, read through get())
  chunk_decoders codecs_;
  shared_chunk_cache* cache_;
};

}  // namespace gpufeed::detail::hdf5
