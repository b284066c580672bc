// gpufeed — one block of a remote object as the node-local cache stores it on disk
// (local_cache.hpp): a file of a fixed-size header, then the block's bytes.
//
// The header names what the block is (the object's size, the block's index and length, its
// size of page) and holds a CRC-32C (crc32c.hpp) of every page of the block's bytes and one of
// the header itself. A read checks the header and then only the pages it touches, so a small
// record read from a large block costs one page's checksum, not the block's; every byte handed
// to a reader was checked against its page's CRC on that read. A file that fails a check (a
// torn write the rename could not hide after a power loss, a disk error, a file overwritten by
// hand) is reported as bad, never delivered.
//
// Format 2 (magic gfcblk2, CRC-32C). Files of format 1 (zlib's CRC-32) have other names
// (local_cache.hpp's block_path), so this format never reads them: they age out of the cache
// by LRU like any block no one reads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/detail/remote/crc32c.hpp"

namespace gpufeed::detail::remote {

inline constexpr std::size_t cache_header_bytes = 8192;  // the data starts at this offset
// The checksummed unit: small, so a record read checks few bytes besides its own.
inline constexpr std::size_t cache_page_bytes = 8192;
// Pages a block may have (an 8 MiB block): the fixed fields and a CRC a page fit the header.
inline constexpr std::size_t cache_max_pages = 1024;
inline constexpr char cache_block_magic[8] = {'g', 'f', 'c', 'b', 'l', 'k', '2', '\0'};

// The fixed fields at the start of a block file (native byte order: a cache belongs to a node).
struct cache_block_fields {
  char magic[8];
  std::uint64_t object_size;
  std::uint64_t block_index;
  std::uint32_t length;      // bytes of the object in this block
  std::uint32_t page_bytes;  // the checksummed unit
  std::uint32_t pages;       // ceil(length / page_bytes) CRCs follow the fields
  std::uint32_t header_crc;  // of the fields (this one 0) and the page CRCs
};
static_assert(sizeof(cache_block_fields) == 40);
static_assert(sizeof(cache_block_fields) + 4 * cache_max_pages <= cache_header_bytes);

// A block's file image: header then bytes, ready to be written in one go.
[[nodiscard]] inline std::vector<std::byte> encode_cache_block(std::span<const std::byte> data,
                                                               std::uint64_t object_size,
                                                               std::uint64_t block_index) {
  cache_block_fields f{};
  std::memcpy(f.magic, cache_block_magic, sizeof f.magic);
  f.object_size = object_size;
  f.block_index = block_index;
  f.length = static_cast<std::uint32_t>(data.size());
  f.page_bytes = static_cast<std::uint32_t>(cache_page_bytes);
  f.pages = static_cast<std::uint32_t>((data.size() + cache_page_bytes - 1) / cache_page_bytes);
  std::vector<std::byte> out(cache_header_bytes + data.size());
  const std::size_t whole = data.size() / cache_page_bytes;
  std::vector<std::uint32_t> page_crcs(f.pages);
  crc32c_pages(data.data(), cache_page_bytes, whole, page_crcs.data());
  if (whole < f.pages)
    page_crcs[whole] = crc32c(0, data.data() + whole * cache_page_bytes,
                              data.size() - whole * cache_page_bytes);
  if (f.pages) std::memcpy(out.data() + sizeof f, page_crcs.data(), 4 * std::size_t{f.pages});
  std::memcpy(out.data(), &f, sizeof f);
  f.header_crc = crc32c(0, out.data(), sizeof f + 4 * std::size_t{f.pages});
  std::memcpy(out.data(), &f, sizeof f);
  if (!data.empty()) std::memcpy(out.data() + cache_header_bytes, data.data(), data.size());
  return out;
}

// A block file's header as read back, checked against what the reader expects of it.
class cache_block_header {
 public:
  // True when `h` (cache_header_bytes read from the file's start) is the header of block
  // `block_index`, `length` bytes long, of an object of `object_size` bytes, and intact.
  [[nodiscard]] bool parse(std::span<const std::byte> h, std::uint64_t object_size,
                           std::uint64_t block_index, std::uint32_t length) noexcept {
    if (h.size() < cache_header_bytes) return false;
    std::memcpy(&f_, h.data(), sizeof f_);
    if (std::memcmp(f_.magic, cache_block_magic, sizeof f_.magic) != 0) return false;
    if (f_.object_size != object_size || f_.block_index != block_index || f_.length != length ||
        f_.page_bytes != cache_page_bytes || f_.pages > cache_max_pages ||
        f_.pages != (length + cache_page_bytes - 1) / cache_page_bytes)
      return false;
    cache_block_fields zeroed = f_;
    zeroed.header_crc = 0;
    std::uint32_t c = crc32c(0, &zeroed, sizeof zeroed);
    c = crc32c(c, h.data() + sizeof f_, 4 * std::size_t{f_.pages});
    if (c != f_.header_crc) return false;
    crcs_.resize(f_.pages);
    if (f_.pages) std::memcpy(crcs_.data(), h.data() + sizeof f_, 4 * std::size_t{f_.pages});
    return true;
  }

  // True when the block's pages from page `first` on match their CRCs, the pages being
  // `head` (the first page whole, or empty), `body` (whole pages end to end; the block's last
  // may be short) and `tail` (the last page whole, or empty), in that order: a read lands the
  // pages that lie whole in its reader's range in the reader's buffer, the edges elsewhere.
  [[nodiscard]] bool pages_intact(std::size_t first, std::span<const std::byte> head,
                                  std::span<const std::byte> body,
                                  std::span<const std::byte> tail) const noexcept {
    constexpr std::size_t p = cache_page_bytes, batch = 48;
    const std::size_t middle = (body.size() + p - 1) / p;
    const std::size_t pages = (head.empty() ? 0 : 1) + middle + (tail.empty() ? 0 : 1);
    if (first > crcs_.size() || pages > crcs_.size() - first) return false;
    const auto page_of = [&](std::size_t j) -> std::span<const std::byte> {
      if (!head.empty()) {
        if (j == 0) return head;
        --j;
      }
      if (j < middle) return body.subspan(j * p, std::min(p, body.size() - j * p));
      return tail;
    };
    const std::byte* page[batch];
    std::size_t bytes[batch];
    std::uint32_t got[batch];
    for (std::size_t k = 0; k < pages; k += batch) {
      const std::size_t n = std::min(batch, pages - k);
      for (std::size_t j = 0; j < n; ++j) {
        const std::span<const std::byte> s = page_of(k + j);
        page[j] = s.data();
        bytes[j] = s.size();
      }
      crc32c_each(page, bytes, n, got);
      for (std::size_t j = 0; j < n; ++j)
        if (got[j] != crcs_[first + k + j]) return false;
    }
    return true;
  }

 private:
  cache_block_fields f_{};
  std::vector<std::uint32_t> crcs_;
};

}  // namespace gpufeed::detail::remote
