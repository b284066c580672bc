// gpufeed — a byte source that reads another in aligned blocks and keeps them: for a reader that
// makes many small reads near each other (HDF5's metadata reads while a shard is opened) over a
// source where each read is a round trip (a ranged GET, remote/http_file.hpp).
//
// Each read is served from the blocks that hold it; a missing block is read whole (clamped to
// the source's size) with one read of the source, so the superblock, object headers, heaps and
// B-tree nodes a shard's open walks cost one request per block they lie in, not one per HDF5
// call. The first block is larger (`head`): an HDF5 file written in one go keeps most of its
// metadata at its start. Kept blocks are bounded (`max_bytes`): past it every kept block is let
// go and reading goes on, so a shard whose metadata is spread over its whole size (a chunk index
// interleaved with its chunks) costs requests, not memory. It is meant for one opening, not for
// record reads: those go to the inner source directly.
//
// Reads are thread-safe (a mutex around the kept blocks; one thread opens a shard). Errors are
// the inner source's, reported through the seam as its own: a block read that fails or ends
// early fails the read that needed it, with the inner source's api(); the name is the inner
// source's.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpufeed/detail/io/byte_source.hpp"

namespace gpufeed::detail::io {

class block_cache final : public byte_source {
 public:
  static constexpr std::size_t default_block = std::size_t{64} << 10;
  static constexpr std::size_t default_head = std::size_t{1} << 20;
  static constexpr std::size_t default_max_bytes = std::size_t{64} << 20;

  // Over `inner`, which must outlive this cache. block_bytes: bytes per block (0: the default);
  // head: bytes of the first block (rounded down to whole blocks, at least one).
  explicit block_cache(const byte_source& inner, std::size_t block_bytes = default_block,
                       std::size_t head = default_head, std::size_t max_bytes = default_max_bytes)
      : inner_(inner),
        block_(block_bytes ? block_bytes : default_block),
        head_(std::max(head / block_ * block_, block_)),
        max_bytes_(max_bytes) {}

  block_cache(const block_cache&) = delete;
  block_cache& operator=(const block_cache&) = delete;
  ~block_cache() override = default;

  [[nodiscard]] std::uint64_t size() const noexcept override { return inner_.size(); }
  [[nodiscard]] const std::string& name() const noexcept override { return inner_.name(); }
  [[nodiscard]] const byte_source& inner() const noexcept { return inner_; }
  // Block reads made of the inner source so far (each one a request over HTTP).
  [[nodiscard]] std::size_t block_reads() const {
    std::lock_guard<std::mutex> g(mutex_);
    return block_reads_;
  }

 protected:
  read_attempt read_some(void* dst, std::size_t n, std::uint64_t offset) const noexcept override {
    if (offset >= size()) return {0, 0};
    std::lock_guard<std::mutex> g(mutex_);
    const std::uint64_t start = block_start(offset);
    const block* b = find(start);
    if (!b) {
      b = load(start);
      if (!b) {
        api_ = failure_.api;
        return {0, failure_.err ? failure_.err : EIO};
      }
    }
    const std::uint64_t within = offset - start;
    if (within >= b->bytes.size()) return {0, 0};  // the inner source ended before its size
    const std::size_t got =
        static_cast<std::size_t>(std::min<std::uint64_t>(n, b->bytes.size() - within));
    std::memcpy(dst, b->bytes.data() + within, got);
    return {got, 0};
  }
  [[nodiscard]] const char* api(bool /*scatter*/) const noexcept override {
    return api_;  // the inner source's, for the read that failed
  }

 private:
  struct block {
    std::vector<std::byte> bytes;
  };

  // The first byte of the block holding `offset`: 0 for the head, then every block_ bytes.
  [[nodiscard]] std::uint64_t block_start(std::uint64_t offset) const noexcept {
    return offset < head_ ? 0 : offset / block_ * block_;
  }
  [[nodiscard]] const block* find(std::uint64_t start) const noexcept {
    const auto it = blocks_.find(start);
    return it == blocks_.end() ? nullptr : it->second.get();
  }

  // Reads the block at `start` (the inner source's bytes up to its size, fewer when it ended
  // early: a short block, whose end is the source's end), keeps it and returns it; null when the
  // read failed (failure_ says how).
  const block* load(std::uint64_t start) const noexcept {
    try {
      const std::uint64_t want =
          std::min<std::uint64_t>(start == 0 ? head_ : block_, size() - start);
      auto b = std::make_unique<block>();
      b->bytes.resize(static_cast<std::size_t>(want));
      ++block_reads_;
      const read_outcome o = inner_.try_read(b->bytes.data(), b->bytes.size(), start);
      if (o.why == read_outcome::stop::failed) {
        failure_ = {o.err, o.api};
        return nullptr;
      }
      if (!o.ok()) b->bytes.resize(static_cast<std::size_t>(o.at - start));
      if (kept_ + b->bytes.size() > max_bytes_) {
        blocks_.clear();
        kept_ = 0;
      }
      kept_ += b->bytes.size();
      return (blocks_[start] = std::move(b)).get();
    } catch (...) {  // no memory for the block
      failure_ = {ENOMEM, "block_cache"};
      return nullptr;
    }
  }

  struct failure {
    int err = 0;
    const char* api = "read";
  };

  const byte_source& inner_;
  std::size_t block_;
  std::size_t head_;
  std::size_t max_bytes_;
  mutable std::mutex mutex_;
  mutable std::map<std::uint64_t, std::unique_ptr<block>> blocks_;
  mutable std::size_t kept_ = 0;
  mutable std::size_t block_reads_ = 0;
  mutable failure failure_;
  mutable const char* api_ = "read";
};

}  // namespace gpufeed::detail::io
