// gpufeed — decoding one chunk of an indexed HDF5 shard in the calling thread: its stored bytes
// read with pread, then its filters undone (fletcher32 verified, shuffle, the compressors of
// chunk_decoders.hpp) into a buffer of exactly the chunk's size. The stored bytes and the
// intermediate stages live in a scratch lease counted in the shared cache's byte budget
// (detail/unit_cache/scratch_lease.hpp). Errors name the shard's file and the record being read.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "gpufeed/detail/hdf5/chunk_decoders.hpp"
#include "gpufeed/detail/hdf5/filters.hpp"
#include "gpufeed/detail/hdf5/geometry.hpp"
#include "gpufeed/detail/hdf5/scratch_need.hpp"
#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/detail/unit_cache/scratch_lease.hpp"
#include "gpufeed/detail/unit_cache/shared_chunk_cache.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

#ifdef GPUFEED_TESTING
// Test-only observation point (test targets define GPUFEED_TESTING): when set, called once per
// chunk decode (read and filters undone) with the shard and the chunk, from the decoding thread.
// Tests count decodes per chunk with it (each chunk decoded once per epoch in sequential order).
// Unset: one relaxed load per decoded chunk, nothing per record.
using chunk_decode_hook = void (*)(const shard_index&, const chunk_entry&) noexcept;
inline std::atomic<chunk_decode_hook> chunk_decode_observer{nullptr};
#endif

// One reader's chunk decoder: its scratch and codec contexts. Not thread-safe; one per reader.
class chunk_decoder {
 public:
  explicit chunk_decoder(unit_cache::shared_chunk_cache& cache)
      : scratch_(cache), cache_(&cache) {}

  // Reads chunk c and undoes its filters into `out` (exactly chunk_bytes long).
  void decode(const shard_index& s, const chunk_entry& c, std::uint64_t chunk,
              std::span<std::byte> out, std::uint64_t global) {
#ifdef GPUFEED_TESTING
    if (const auto hook = chunk_decode_observer.load(std::memory_order_relaxed)) hook(s, c);
#endif
    if (s.unfiltered(c)) {  // size == chunk_bytes, checked at open
      s.file.read_exact(out.data(), out.size(), c.address, global);
      return;
    }
    const int n = static_cast<int>(s.pipeline.size());
    auto active = [&](int k) { return !(c.filter_mask & (1u << k)); };
    int first = 0;  // the first filter applied when writing = the last one undone here
    while (!active(first)) ++first;

    // The scratch, counted in the cache's budget (scratch_lease.hpp), held until the end.
    check_fits(s, global);  // also when decoded into the record: its scratch is as large
    const unit_cache::scratch_lease::use held = scratch_.begin(scratch_need_of(s, c));
    unit_cache::scratch_account& acc = held.account();
    std::span<std::byte> cur = acc.stored.resize(static_cast<std::size_t>(c.size));
    s.file.read_exact(cur.data(), cur.size(), c.address, global);
    for (int k = n - 1; k >= 0; --k) {
      if (!active(k)) continue;
      const filter_step& f = s.pipeline[static_cast<std::size_t>(k)];
      if (f.kind == codec::kind::fletcher32) {
        if (!fletcher32_matches(cur.data(), cur.size()))
          corrupt(s, c, chunk, global, "fletcher32 checksum mismatch", "fletcher32");
        cur = cur.first(cur.size() - 4);
        continue;
      }
      // a compressor's output is the chunk plus the checksums of fletcher32 filters applied
      // before it; shuffle and an uncompressed bitshuffle keep the size
      std::size_t want = cur.size();
      if (compresses(f)) {
        want = s.grid.chunk_bytes;
        for (int j = 0; j < k; ++j)
          if (active(j) && s.pipeline[static_cast<std::size_t>(j)].kind == codec::kind::fletcher32)
            want += 4;
      }
      std::span<std::byte> target;
      if (k == first) {
        if (want != out.size())
          corrupt(s, c, chunk, global,
                  "decoded size " + std::to_string(want) + " != chunk size " +
                      std::to_string(out.size()),
                  "filter pipeline");
        target = out;
      } else {
        target = (cur.data() == acc.a.data() ? acc.b : acc.a).resize(want);  // within need
      }
      if (f.kind == codec::kind::shuffle) {
        unshuffle(cur.data(), target.data(), cur.size(), f.element_size);
      } else if (const codec::result r = codecs_.decode(f, cur, target); !r.ok) {
        if (r.library_failed) {  // the codec library itself failed, not the data
          error_context ctx;
          ctx.file = s.path;
          ctx.record = global;
          ctx.api = r.api;
          throw library_error("decoder failed: " + r.message, std::move(ctx));
        }
        corrupt(s, c, chunk, global, r.message, r.api);
      }
      cur = target;
    }
    if (cur.size() != out.size())
      corrupt(s, c, chunk, global,
              "decoded " + std::to_string(cur.size()) + " bytes, expected " +
                  std::to_string(out.size()),
              "filter pipeline");
    if (cur.data() != out.data()) std::memcpy(out.data(), cur.data(), out.size());
  }

  // config_error naming file, dataset and record when a decoded chunk of s cannot fit the
  // cache's budget: it would be decoded outside the cache for every record
  // (detail/unit_cache/shared_chunk_cache.hpp), and its decode scratch outside the budget
  // (detail/unit_cache/scratch_lease.hpp).
  // A budget of 0 (no chunked shard when the source was built, or asked for) caches nothing:
  // every chunk is decoded in the overflow buffer, one at a time.
  void check_fits(const shard_index& s, std::uint64_t global) const {
    const std::size_t budget = cache_->budget();
    if (budget == 0 || s.grid.chunk_bytes <= budget) return;
    error_context ctx;
    ctx.file = s.path;
    ctx.record = global;
    throw config_error("a decoded chunk of dataset '" + s.dataset_name + "' holds " +
                           std::to_string(s.grid.chunk_bytes) +
                           " bytes, more than the decoded-chunk budget of " +
                           std::to_string(budget) +
                           " bytes: raise hdf5_options::decode_cache_bytes to one chunk at least",
                       std::move(ctx));
  }

  // Frees the scratch buffers when they hold more than `keep` bytes.
  void release(std::size_t keep = 0) noexcept { scratch_.release(keep); }

 private:
  [[noreturn]] static void corrupt(const shard_index& s, const chunk_entry& c, std::uint64_t k,
                                   std::uint64_t global, const std::string& what, const char* api,
                                   std::optional<long long> status = std::nullopt,
                                   std::string status_text = {}) {
    const coords g = s.grid.position(k);
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

  unit_cache::scratch_lease scratch_;  // the chunk's stored bytes and filter stages (decode())
  chunk_decoders codecs_;
  unit_cache::shared_chunk_cache* cache_;
};

}  // namespace gpufeed::detail::hdf5
