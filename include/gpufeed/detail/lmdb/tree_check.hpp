// gpufeed — checking the shape of an immutable shard's B-tree before LMDB walks it.
//
// Why: LMDB trusts its pages. On a damaged page its cursor code either reads past the page (node
// offsets are 16-bit) or stops the process with an internal assertion (e.g. 'IS_LEAF(mp)' in
// mdb_cursor_next when a branch points to a page of the wrong kind). Neither can be caught, so
// for shards promised immutable every branch and leaf page of the main database is read once with
// plain file reads and checked against what LMDB 0.9 asserts or dereferences while reading:
//   - a page's own number matches where it was found, and lies between the meta pages and the
//     last page in use; no page is visited twice more than the file has pages;
//   - pages above the last level are branch pages with >= 2 nodes, pages on it are leaves;
//   - the node-offset array and every node (header, key, inline value or overflow page number)
//     lie inside the page; child and overflow page numbers lie inside the file.
// Overflow pages are not read here; the scan (shard_table.hpp) checks every value lies inside the
// file, that its overflow page's own header agrees (check_overflow_value in shard.hpp) and that
// no two values share overflow pages. Layout (64-bit, MDB_DATA_VERSION 1):
//   page header (16 bytes): pgno u64 | pad u16 | flags u16 | lower u16 | upper u16, then the u16
//   node offsets; node: lo u16 | hi u16 | flags u16 | ksize u16 | key | data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace gpufeed::detail::lmdb {

namespace page_layout {
inline constexpr std::size_t header = 16, node_header = 8, max_depth = 32;
inline constexpr std::uint16_t p_branch = 0x01, p_leaf = 0x02, p_overflow = 0x04, p_meta = 0x08,
                               p_leaf2 = 0x20, p_subp = 0x40;
inline constexpr std::uint16_t f_bigdata = 0x01, f_dupdata = 0x04;
}  // namespace page_layout

struct tree_root {
  std::uint64_t root = 0;      // page number of the main database's root
  std::uint16_t depth = 0;     // levels, 1 = the root is a leaf
  std::uint64_t last_pg = 0;   // last page in use
  std::uint32_t psize = 0;
};

// Checks the tree; read_page(pgno, buffer) fills psize bytes and returns false if it cannot.
// Returns why the tree is damaged, or an empty string.
template <class ReadPage>
std::string check_tree(const tree_root& t, ReadPage&& read_page) {
  namespace P = page_layout;
  auto u16 = [](const unsigned char* p) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  };
  if (t.depth == 0 || t.depth > P::max_depth) return "bad tree depth " + std::to_string(t.depth);
  std::vector<unsigned char> page(t.psize);
  std::vector<std::pair<std::uint64_t, unsigned>> todo{{t.root, 1}};  // (page, level)
  std::uint64_t visits = 0;
  while (!todo.empty()) {
    const auto [pgno, level] = todo.back();
    todo.pop_back();
    const std::string where = "page " + std::to_string(pgno) + ": ";
    if (pgno < 2 || pgno > t.last_pg) return where + "outside the pages in use";
    if (++visits > t.last_pg) return "the tree visits more pages than the file holds";
    if (!read_page(pgno, page.data())) return where + "cannot be read";
    std::uint64_t own = 0;
    std::memcpy(&own, page.data(), 8);
    const std::uint16_t flags = u16(page.data() + 10);
    const std::uint16_t lower = u16(page.data() + 12);
    const std::uint16_t upper = u16(page.data() + 14);
    const bool leaf = level == t.depth;
    if (own != pgno) return where + "its header names page " + std::to_string(own);
    const std::uint16_t kind = leaf ? P::p_leaf : P::p_branch;
    if ((flags & (P::p_branch | P::p_leaf | P::p_overflow | P::p_meta | P::p_leaf2 | P::p_subp)) !=
        kind)
      return where + (leaf ? "not a leaf page" : "not a branch page");
    if (lower < P::header || lower > upper || upper > t.psize || (lower & 1u))
      return where + "bad free-space bounds";
    const std::size_t nkeys = (lower - P::header) / 2;
    if (nkeys == 0 || (!leaf && nkeys < 2)) return where + "too few nodes";
    for (std::size_t i = 0; i < nkeys; ++i) {
      const std::size_t off = u16(page.data() + P::header + 2 * i);
      if (off < upper || (off & 1u) || off + P::node_header > t.psize)
        return where + "a node lies outside the page";
      const unsigned char* n = page.data() + off;
      const std::uint16_t lo = u16(n), hi = u16(n + 2), nflags = u16(n + 4), ksize = u16(n + 6);
      std::size_t end = off + P::node_header + ksize;
      if (end > t.psize) return where + "a key runs past the page";
      if (!leaf) {
        const std::uint64_t child = lo | (std::uint64_t{hi} << 16) | (std::uint64_t{nflags} << 32);
        if (level + 1 > t.depth) return where + "deeper than the tree";
        todo.emplace_back(child, level + 1);
        continue;
      }
      if (nflags & P::f_dupdata) return where + "duplicate-key node in a plain database";
      if (nflags & P::f_bigdata) {
        if (end + 8 > t.psize) return where + "an overflow page number runs past the page";
        std::uint64_t ov = 0;
        std::memcpy(&ov, n + P::node_header + ksize, 8);
        if (ov < 2 || ov > t.last_pg) return where + "an overflow page lies outside the file";
      } else {
        end += lo | (std::size_t{hi} << 16);
        if (end > t.psize) return where + "a value runs past the page";
      }
    }
  }
  return {};
}

}  // namespace gpufeed::detail::lmdb
