// gpufeed — checking a dataset's Data Layout message before HDF5 decodes it.
//
// libhdf5 1.10.8 divides by every chunk dimension while opening a chunked dataset
// (H5D__chunk_set_info, inside H5Dopen2): a crafted file with a chunk dimension of 0 kills the
// process with SIGFPE. So before H5Dopen2, gpufeed reads the dataset's object header itself
// (pread, bounded) and refuses a zero chunk dimension with format_error naming file and dataset.
//
// H5Oget_info_by_name2 with H5O_INFO_BASIC gives the header's address: it loads the header
// chunks but decodes no layout message (checked against the crafted file in the tests).
// Byte layouts follow the HDF5 File Format Specification 3.0 (object header versions 1 and 2,
// continuation message 0x10, data layout message 0x08 versions 1-4). What the parser does not
// understand (an unknown header or layout version, a shared message, an oversized chunk) makes
// it skip the check — HDF5 then judges the file — so a valid file is never refused; only what it
// positively identifies as bad (a zero chunk dimension, a chunked layout of fewer than 2
// dimensions, a continuation loop or one pointing past the end of the file, a message overrunning
// its chunk) is a format_error.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/library.hpp"
#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

// The chunk dimensions a chunked dataset's layout message declares (the last one is the element
// size, as HDF5 stores it), and the absolute file offset of each (tests patch them).
// ndims_offset: the absolute file offset of the message's dimensionality byte.
struct chunk_layout {
  std::vector<std::uint64_t> dims;
  std::vector<std::uint64_t> dim_offsets;
  unsigned dim_bytes = 4;
  std::uint64_t ndims_offset = 0;
};

class layout_reader {
 public:
  // base: the base address (the user block size); sa/ss: the superblock's size of offsets and
  // size of lengths.
  layout_reader(const io::byte_source& f, std::uint64_t base, unsigned sa, unsigned ss,
                const std::string& dataset)
      : f_(f), base_(base), sa_(sa), ss_(ss), dataset_(dataset) {}

  // The chunk layout of the object header at relative address `addr`; nullopt when the dataset
  // is not chunked or the header holds something this parser does not understand.
  std::optional<chunk_layout> read(std::uint64_t addr) {
    std::vector<std::uint8_t> pre = bytes(addr, 6);
    if (pre[0] == 1) return walk_v1(addr);
    if (pre[0] == 'O' && pre[1] == 'H' && pre[2] == 'D' && pre[3] == 'R' && pre[4] == 2)
      return walk_v2(addr, pre[5]);
    return std::nullopt;  // not a header version this parser knows
  }

 private:
  static constexpr std::uint64_t max_chunk_bytes = std::uint64_t{16} << 20;
  static constexpr std::size_t max_chunks = 4096;
  struct block {
    std::uint64_t addr, length;
  };

  [[noreturn]] void bad(const std::string& why) const {
    format_fail("dataset '" + dataset_ + "': " + why + ": damaged or crafted", f_.name());
  }
  static std::uint64_t le(const std::uint8_t* p, unsigned n) {
    std::uint64_t v = 0;
    for (unsigned i = n; i-- > 0;) v = (v << 8) | p[i];
    return v;
  }
  // n bytes at relative address `addr`, or format_error when they are not all inside the file.
  std::vector<std::uint8_t> bytes(std::uint64_t addr, std::uint64_t n) const {
    std::uint64_t at = 0, end = 0;
    if (__builtin_add_overflow(base_, addr, &at) || __builtin_add_overflow(at, n, &end) ||
        end > f_.size())
      bad("object header bytes [" + std::to_string(addr) + ", +" + std::to_string(n) +
          ") lie past the end of the file (" + std::to_string(f_.size()) + " bytes)");
    std::vector<std::uint8_t> v(static_cast<std::size_t>(n));
    f_.read_exact(v.data(), v.size(), at);
    return v;
  }
  // Queues the continuation block a 0x10 message describes; a block seen before is a loop.
  void continuation(const std::uint8_t* d, std::uint64_t size, std::vector<block>& todo) {
    if (size < sa_ + ss_) bad("object header continuation message too short");
    const block b{le(d, sa_), le(d + sa_, ss_)};
    if (!seen_.insert(b.addr).second) bad("object header continuation loop");
    if (seen_.size() > max_chunks) bad("more than 4096 object header chunks");
    todo.push_back(b);
  }

  std::optional<chunk_layout> walk_v1(std::uint64_t addr) {
    const auto pre = bytes(addr, 16);  // version, reserved, count, refcount, size, padding
    std::vector<block> todo{{addr + 16, le(&pre[8], 4)}};
    seen_.insert(addr);
    while (!todo.empty()) {
      const block b = todo.back();
      todo.pop_back();
      if (b.length > max_chunk_bytes) return std::nullopt;
      const auto c = bytes(b.addr, b.length);
      for (std::uint64_t p = 0; p + 8 <= c.size();) {
        const unsigned type = static_cast<unsigned>(le(&c[p], 2));
        const std::uint64_t size = le(&c[p + 2], 2);
        const std::uint8_t flags = c[p + 4];
        p += 8;
        if (p + size > c.size()) bad("object header message overruns its chunk");
        if (type == 0x10) continuation(&c[p], size, todo);
        if (type == 0x08) return (flags & 0x02) ? std::nullopt : layout(&c[p], size, b.addr + p);
        p += size;
      }
    }
    return std::nullopt;
  }

  std::optional<chunk_layout> walk_v2(std::uint64_t addr, std::uint8_t hflags) {
    // "OHDR", version, flags, [4 times if bit 5], [2 attribute thresholds if bit 4], chunk-0 size.
    const unsigned size_bytes = 1u << (hflags & 3u);
    const std::uint64_t fixed =
        6 + ((hflags & 0x20) ? 16 : 0) + ((hflags & 0x10) ? 4 : 0);
    const auto pre = bytes(addr, fixed + size_bytes);
    const unsigned msg_header = (hflags & 0x04) ? 6 : 4;  // + creation order when tracked
    std::vector<block> todo{{addr + fixed + size_bytes, le(&pre[fixed], size_bytes)}};
    seen_.insert(addr);
    bool first = true;
    while (!todo.empty()) {
      block b = todo.back();
      todo.pop_back();
      if (!first) {  // "OCHK" + messages + checksum; the length counts all three
        const auto sig = bytes(b.addr, 4);
        if (b.length < 8 || sig[0] != 'O' || sig[1] != 'C' || sig[2] != 'H' || sig[3] != 'K')
          bad("object header continuation block without its OCHK signature");
        b = {b.addr + 4, b.length - 8};
      }
      first = false;
      if (b.length > max_chunk_bytes) return std::nullopt;
      const auto c = bytes(b.addr, b.length + 4);  // the checksum must be inside the file too
      const std::uint64_t end = b.length;
      for (std::uint64_t p = 0; p + msg_header <= end;) {  // fewer bytes left: the gap
        const unsigned type = c[p];
        const std::uint64_t size = le(&c[p + 1], 2);
        const std::uint8_t flags = c[p + 3];
        p += msg_header;
        if (p + size > end) bad("object header message overruns its chunk");
        if (type == 0x10) continuation(&c[p], size, todo);
        if (type == 0x08) return (flags & 0x02) ? std::nullopt : layout(&c[p], size, b.addr + p);
        p += size;
      }
    }
    return std::nullopt;
  }

  // The Data Layout message at relative address `at` (`size` bytes at d).
  std::optional<chunk_layout> layout(const std::uint8_t* d, std::uint64_t size, std::uint64_t at) {
    if (size < 2) return std::nullopt;
    const unsigned version = d[0];
    std::uint64_t ndims = 0, dims_at = 0, ndims_at = 0;
    unsigned width = 4;
    if (version == 1 || version == 2) {  // version, ndims, class, 5 reserved, address, dims
      if (size < 8 || d[2] != 2) return std::nullopt;
      ndims = d[1];
      ndims_at = 1;
      dims_at = 8 + sa_;
    } else if (version == 3) {  // version, class, ndims, address, dims
      if (size < 3 || d[1] != 2) return std::nullopt;
      ndims = d[2];
      ndims_at = 2;
      dims_at = 3 + sa_;
    } else if (version == 4) {  // version, class, flags, ndims, bytes per dim, dims, index type
      if (size < 5 || d[1] != 2) return std::nullopt;
      ndims = d[3];
      ndims_at = 3;
      width = d[4];
      if (width < 1 || width > 8) return std::nullopt;
      dims_at = 5;
    } else {
      return std::nullopt;  // a layout version newer than this parser
    }
    if (dims_at + ndims * width > size) return std::nullopt;
    chunk_layout l;
    l.dim_bytes = width;
    l.ndims_offset = base_ + at + ndims_at;
    for (std::uint64_t k = 0; k < ndims; ++k) {
      l.dims.push_back(le(d + dims_at + k * width, width));
      l.dim_offsets.push_back(base_ + at + dims_at + k * width);
    }
    return l;
  }

  const io::byte_source& f_;
  std::uint64_t base_;
  unsigned sa_, ss_;
  const std::string& dataset_;
  std::set<std::uint64_t> seen_;
};

// The chunk layout of dataset `name` read from the file's bytes, or nullopt (not chunked, not
// found, or not understood). format_error for a damaged object header (see layout_reader).
// Called under the library lock.
inline std::optional<chunk_layout> read_chunk_layout(hid_t file_id, const io::byte_source& f,
                                                     const std::string& name) {
  H5O_info_t info{}, root{};
  // An external link leads to an object of another file, whose header these bytes do not hold.
  if (H5Oget_info_by_name2(file_id, name.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
      H5Oget_info2(file_id, &root, H5O_INFO_BASIC) < 0 || info.type != H5O_TYPE_DATASET ||
      info.fileno != root.fileno) {
    take_error_stack();  // H5Dopen2 reports a missing dataset
    return std::nullopt;
  }
  hsize_t userblock = 0;
  std::size_t sa = 0, ss = 0;
  const hid_t fcpl = H5Fget_create_plist(file_id);
  const bool sized = fcpl >= 0 && H5Pget_userblock(fcpl, &userblock) >= 0 &&
                     H5Pget_sizes(fcpl, &sa, &ss) >= 0;
  if (fcpl >= 0) H5Pclose(fcpl);
  if (!sized || sa < 1 || sa > 8 || ss < 1 || ss > 8) {
    take_error_stack();
    return std::nullopt;
  }
  return layout_reader(f, userblock, static_cast<unsigned>(sa), static_cast<unsigned>(ss), name)
      .read(info.addr);
}

// format_error naming file and dataset when dataset `name` declares a chunk dimension of 0, or a
// chunked layout of fewer than 2 dimensions (a chunk of rank 0: HDF5 stores the element size as
// the last dimension, and a chunked dataset has rank 1 at least), either of which would crash
// libhdf5 in H5Dopen2 (division by zero in H5D__chunk_set_info). Call before opening any dataset.
inline void precheck_layout(hid_t file_id, const io::byte_source& f, const std::string& name) {
  const auto l = read_chunk_layout(file_id, f, name);
  if (!l) return;
  if (l->dims.size() < 2)
    format_fail("dataset '" + name + "': chunked layout message declares " +
                    std::to_string(l->dims.size()) + " dimensions (at byte " +
                    std::to_string(l->ndims_offset) +
                    "; a chunked dataset has rank 1 at least, plus the element size): damaged or "
                    "crafted",
                f.name());
  for (std::size_t k = 0; k < l->dims.size(); ++k)
    if (l->dims[k] == 0)
      format_fail("dataset '" + name + "': chunk dimension " + std::to_string(k) +
                      " is 0 (layout message at byte " + std::to_string(l->dim_offsets[k]) +
                      "): damaged or crafted",
                  f.name());
}

}  // namespace gpufeed::detail::hdf5
