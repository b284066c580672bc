// gpufeed — the hot path: reading one record of an indexed shard with pread, decoding filtered
// chunks in the calling thread, and a small per-reader cache of decoded chunks.
//
// No HDF5 call happens here except for fallback shards. Bytes land in the caller's buffer
// directly when they can (contiguous data; an unfiltered chunk part that is one run; a chunk
// that is exactly one run of the record decodes straight into it); otherwise the chunk is
// decoded once into the cache and the record's runs are copied out, so consecutive records of
// one compressed chunk cost one decode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpufeed/detail/hdf5/chunk_decoders.hpp"
#include "gpufeed/detail/hdf5/filters.hpp"
#include "gpufeed/detail/hdf5/geometry.hpp"
#include "gpufeed/detail/hdf5/shard.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

// A grow-only byte buffer that is never zero-filled (decoding overwrites all of it).
class scratch {
 public:
  std::span<std::byte> get(std::size_t n) {
    if (n > capacity_) {
      data_.reset(new std::byte[n]);
      capacity_ = n;
    }
    return {data_.get(), n};
  }
  [[nodiscard]] const std::byte* data() const noexcept { return data_.get(); }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  void release() noexcept {
    data_.reset();
    capacity_ = 0;
  }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t capacity_ = 0;
};

// Least-recently-used decoded chunks, keyed by a source-wide chunk number.
class chunk_cache {
 public:
  static constexpr std::uint64_t no_key = std::numeric_limits<std::uint64_t>::max();

  explicit chunk_cache(std::size_t capacity = 1) : capacity_(capacity ? capacity : 1) {}

  // The decoded bytes of chunk `key`, or nullptr.
  const std::byte* find(std::uint64_t key) {
    if (capacity_ > linear_limit) {
      auto it = map_.find(key);
      if (it == map_.end()) return nullptr;
      slot& sl = slots_[it->second];
      sl.used = ++tick_;
      return sl.bytes.data();
    }
    for (slot& sl : slots_)
      if (sl.key == key) {
        sl.used = ++tick_;
        return sl.bytes.data();
      }
    return nullptr;
  }

  // A slot to decode into (evicting the least recently used); it holds no key until commit().
  std::size_t acquire() {
    std::size_t victim = slots_.size();
    if (slots_.size() < capacity_) {
      slots_.emplace_back();
    } else {
      victim = 0;
      for (std::size_t k = 1; k < slots_.size(); ++k)
        if (slots_[k].used < slots_[victim].used) victim = k;
      if (capacity_ > linear_limit && slots_[victim].key != no_key) map_.erase(slots_[victim].key);
    }
    slots_[victim].key = no_key;
    slots_[victim].used = ++tick_;
    return victim;
  }
  std::span<std::byte> buffer(std::size_t k, std::size_t bytes) {
    return slots_[k].bytes.get(bytes);
  }
  void commit(std::size_t k, std::uint64_t key) {
    slots_[k].key = key;
    if (capacity_ > linear_limit) map_[key] = k;
  }

  [[nodiscard]] std::size_t bytes_held() const noexcept {
    std::size_t n = 0;
    for (const slot& sl : slots_) n += sl.bytes.capacity();
    return n;
  }
  void clear() noexcept {
    slots_.clear();
    map_.clear();
  }

 private:
  static constexpr std::size_t linear_limit = 16;
  struct slot {
    std::uint64_t key = no_key;
    std::uint64_t used = 0;
    scratch bytes;
  };
  std::size_t capacity_;
  std::uint64_t tick_ = 0;
  std::vector<slot> slots_;
  std::unordered_map<std::uint64_t, std::size_t> map_;
};

class record_reader {
 public:
  explicit record_reader(std::size_t cache_capacity = 1) : cache_(cache_capacity) {}

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
        break;
    }
    if (s.swap) byteswap_elements(dst.data(), n, s.element_size);
  }

  // Frees the decoded-chunk cache and scratch buffers when they hold more than `keep` bytes.
  void release(std::size_t keep = 0) noexcept {
    if (cache_.bytes_held() + stored_.capacity() + a_.capacity() + b_.capacity() <= keep) return;
    cache_.clear();
    stored_.release();
    a_.release();
    b_.release();
  }

 private:
  void read_chunked(const shard_index& s, std::uint64_t key_base, std::uint64_t local,
                    std::uint64_t global, std::span<std::byte> dst) {
    const record_box box = s.box(local);
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
        });
        return;
      }
      const std::byte* bytes = cache_.find(key_base + k);
      if (!bytes) {
        const std::size_t slot = cache_.acquire();
        const auto buf = cache_.buffer(slot, s.grid.chunk_bytes);
        decode(s, c, g, buf, global);
        cache_.commit(slot, key_base + k);
        bytes = buf.data();
      }
      part.for_each_run([&](std::size_t src, std::size_t at, std::size_t len) {
        std::memcpy(dst.data() + at, bytes + src, len);
      });
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
    if (s.unfiltered(c)) {  // size == chunk_bytes, checked at open
      s.file.read_exact(out.data(), out.size(), c.address, global);
      return;
    }
    const int n = static_cast<int>(s.pipeline.size());
    auto active = [&](int k) { return !(c.filter_mask & (1u << k)); };
    int first = 0;  // the first filter applied when writing = the last one undone here
    while (!active(first)) ++first;

    std::span<std::byte> cur = stored_.get(static_cast<std::size_t>(c.size));
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
        target = (cur.data() == a_.data() ? b_ : a_).get(want);
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

  scratch stored_, a_, b_;
  chunk_decoders codecs_;
  chunk_cache cache_;
};

}  // namespace gpufeed::detail::hdf5
