// gpufeed — checking an LMDB data file's two meta pages before LMDB maps it.
//
// Why: LMDB takes the page size from the newest meta page and computes the address of the second
// meta page from it right after mapping the file; a damaged page size there makes mdb_env_open /
// mdb_env_info touch the map past the end of the file (SIGBUS) before any error can be returned.
// So the metas are read with plain file reads first (pread through the byte-source seam,
// io::posix_file) and must agree with LMDB 0.9's on-disk format (MDB_DATA_VERSION 1, 64-bit
// layout, as written by liblmdb 0.9.x and py-lmdb):
//
//   page header (16 bytes): pgno u64 | pad u16 | flags u16 (P_META = 0x08) | lower u16 | upper u16
//   MDB_meta at byte 16:    magic u32 (0xBEEFC0DE) | version u32 | address u64 | mapsize u64 |
//                           free db (48 bytes; its first u32 is the page size) | main db (48) |
//                           last_pg u64 | txnid u64
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/detail/lmdb/tree_check.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::lmdb {

struct meta_page {
  std::uint32_t psize = 0;
  std::uint64_t last_pg = 0, txnid = 0;
  std::uint16_t main_flags = 0, main_depth = 0;  // the main (unnamed) database's
  std::uint64_t main_root = 0;
};

namespace meta_layout {
inline constexpr std::size_t flags = 10, magic = 16, version = 20, psize = 40, main_flags = 92,
                             main_depth = 94, main_root = 128, last_pg = 136, txnid = 144,
                             size = 152;
inline constexpr std::uint16_t dupsort = 0x04;  // MDB_DUPSORT in a database's flags
inline constexpr std::uint32_t lmdb_magic = 0xBEEFC0DEu, data_version = 1;
inline constexpr std::uint16_t p_meta = 0x08;
}  // namespace meta_layout

template <class T>
T load(const unsigned char* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Reads and checks the meta page at `offset` of `f`; returns why it is unusable, or nullptr. A
// read that ends early or fails is "shorter than two meta pages" (format_error for the caller),
// an OS error included, as when these pages were read through a stream.
inline const char* read_meta(const io::byte_source& f, std::uint64_t offset, meta_page& m) {
  namespace L = meta_layout;
  unsigned char b[L::size];
  if (!f.try_read(b, L::size, offset).ok()) return "the file is shorter than two meta pages";
  if (load<std::uint32_t>(b + L::magic) != L::lmdb_magic) return "no LMDB magic number";
  if (load<std::uint32_t>(b + L::version) != L::data_version) return "unknown LMDB data version";
  if (!(load<std::uint16_t>(b + L::flags) & L::p_meta)) return "the page is not a meta page";
  m.psize = load<std::uint32_t>(b + L::psize);
  m.last_pg = load<std::uint64_t>(b + L::last_pg);
  m.txnid = load<std::uint64_t>(b + L::txnid);
  if (m.psize < 256 || m.psize > 65536 || (m.psize & (m.psize - 1)) != 0) return "bad page size";
  m.main_flags = load<std::uint16_t>(b + L::main_flags);
  m.main_depth = load<std::uint16_t>(b + L::main_depth);
  m.main_root = load<std::uint64_t>(b + L::main_root);
  if (m.last_pg < 1 || (m.main_root != ~std::uint64_t{0} && m.main_root > m.last_pg))
    return "page numbers beyond the last page";
  return nullptr;
}

// Throws format_error (not an LMDB file we can read) or corrupt_error (truncated, damaged tree)
// unless both meta pages are sound, the file holds every page the newest one says is in use and,
// with check_pages, the main database's tree has the shape LMDB relies on (tree_check.hpp).
inline void check_data_file(const std::string& data_file, std::uint64_t file_size,
                            bool check_pages) {
  if constexpr (sizeof(void*) != 8) {
    return;  // the layout above is LMDB's 64-bit one; elsewhere LMDB's own checks must do
  } else {
    error_context ctx;
    ctx.file = data_file;
    // io_error (errno in status; "too many open files" first when no descriptor is left).
    const io::posix_file f(data_file, "cannot open the LMDB data file");
    meta_page m0, m1;
    const char* why = read_meta(f, 0, m0);
    if (!why) why = read_meta(f, m0.psize, m1);
    if (!why && m0.psize != m1.psize) why = "the two meta pages disagree on the page size";
    if (why)
      throw format_error(std::string("not an LMDB environment: data.mdb meta page: ") + why,
                         std::move(ctx));
    const meta_page& newest = m0.txnid < m1.txnid ? m1 : m0;
    if (newest.last_pg >= std::numeric_limits<std::uint64_t>::max() / newest.psize ||
        (newest.last_pg + 1) * newest.psize > file_size)
      throw corrupt_error("data.mdb is truncated: the file has " + std::to_string(file_size) +
                              " bytes but the database uses " + std::to_string(newest.last_pg + 1) +
                              " pages of " + std::to_string(newest.psize) + " bytes",
                          std::move(ctx));
    if (!check_pages || newest.main_root == ~std::uint64_t{0} ||
        (newest.main_flags & meta_layout::dupsort))
      return;  // empty or duplicate-key databases are refused later with their own message
    tree_root t;
    t.root = newest.main_root;
    t.depth = newest.main_depth;
    t.last_pg = newest.last_pg;
    t.psize = newest.psize;
    const std::string bad = check_tree(t, [&](std::uint64_t pgno, unsigned char* buf) {
      return f.try_read(buf, t.psize, pgno * t.psize).ok();
    });
    if (!bad.empty()) throw corrupt_error("damaged LMDB B-tree: " + bad, std::move(ctx));
  }
}

}  // namespace gpufeed::detail::lmdb
