// gpufeed — where LMDB mapped a shard's data file, so every key and value pointer LMDB hands out
// can be checked against the bytes the file really has.
//
// Why: LMDB trusts its pages. A damaged overflow page can claim a value larger than the file, and
// touching mapped bytes past the end of the file raises SIGBUS. LMDB does not publish its map's
// address (MDB_envinfo::me_mapaddr is only set with MDB_FIXEDMAP), so on Linux we find the
// mapping that contains a pointer LMDB returned in /proc/self/maps: its start minus its file
// offset is the map's base. Elsewhere the region is unknown and only sizes are checked.
// Reading /proc/self/maps costs time in the number of mappings (about 1 ms with 1,000 shards
// mapped), which lazily opening shard after shard would pay on every open; so the base is
// first derived from the page a key lies in and confirmed by /proc/self/map_files, which names
// each mapping by its exact range (one stat), and /proc/self/maps is read only when that fails.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace gpufeed::detail::lmdb {

// One file-backed mapping of this process.
struct mapping {
  std::uintptr_t start = 0, end = 0;  // [start, end)
  std::uint64_t offset = 0;           // file offset mapped at start
};

// The file-backed mappings of this process now (empty when /proc/self/maps cannot be read).
inline std::vector<mapping> file_mappings() {
  std::vector<mapping> out;
  struct closer {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, closer> f(std::fopen("/proc/self/maps", "re"));
  if (!f) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, f.get())) {
    std::uintmax_t start = 0, end = 0, offset = 0, inode = 0;
    unsigned major = 0, minor = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%jx-%jx %7s %jx %x:%x %ju", &start, &end, perms, &offset, &major, &minor,
                    &inode) == 7 &&
        inode != 0)
      out.push_back(mapping{static_cast<std::uintptr_t>(start), static_cast<std::uintptr_t>(end),
                            static_cast<std::uint64_t>(offset)});
  }
  return out;
}

// The base address of the mapping that contains p (its start minus its file offset), or null.
// `map_size` (LMDB's me_mapsize) rejects a mapping that cannot be LMDB's map for this env.
inline const std::byte* map_base_of(const std::vector<mapping>& maps, const void* p,
                                    std::size_t map_size) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (const auto& m : maps) {
    if (a < m.start || a >= m.end || m.offset > m.start) continue;
    const std::uintptr_t base = m.start - static_cast<std::uintptr_t>(m.offset);
    if (m.end - base > map_size + 65536) return nullptr;  // + page rounding (up to 64 KiB pages)
    return reinterpret_cast<const std::byte*>(base);
  }
  return nullptr;
}

// The base of LMDB's map of the data file open as `fd`, from `in_page`, a pointer into a page of
// it that LMDB returned (a key in a leaf page): the page's header names its page number, so the
// base is the page's address less that many pages of `psize`; it is the base only if a mapping
// of exactly [base, base + map_size rounded to pages) exists and is that file (stat of its
// /proc/self/map_files entry). Null when not confirmed: callers then search file_mappings().
// The page is read only where LMDB has just read it (it returned a pointer into it).
inline const std::byte* map_base_direct(const void* in_page, std::size_t psize,
                                        std::size_t map_size, int fd) noexcept {
  const long os = ::sysconf(_SC_PAGESIZE);
  if (os <= 0 || psize == 0 || psize > static_cast<std::size_t>(os) ||
      static_cast<std::size_t>(os) % psize != 0)
    return nullptr;  // the map is aligned to OS pages, so to LMDB's only when they divide them
  const auto a = reinterpret_cast<std::uintptr_t>(in_page);
  const std::uintptr_t page = a / psize * psize;
  std::uint64_t pgno = 0;
  std::memcpy(&pgno, reinterpret_cast<const void*>(page), sizeof pgno);
  if (pgno > page / psize) return nullptr;
  const std::uintptr_t base = page - static_cast<std::uintptr_t>(pgno) * psize;
  const std::uintptr_t len = (map_size + static_cast<std::size_t>(os) - 1) /
                             static_cast<std::size_t>(os) * static_cast<std::size_t>(os);
  if (len == 0 || base > UINTPTR_MAX - len || a >= base + len) return nullptr;
  char name[64];
  std::snprintf(name, sizeof name, "/proc/self/map_files/%jx-%jx", static_cast<std::uintmax_t>(base),
                static_cast<std::uintmax_t>(base + len));
  struct stat m {}, f {};
  if (::stat(name, &m) != 0 || ::fstat(fd, &f) != 0) return nullptr;
  if (m.st_dev != f.st_dev || m.st_ino != f.st_ino) return nullptr;
  return reinterpret_cast<const std::byte*>(base);
}

// The bytes a shard's pointers may point into: [base, base + size). Unknown when base is null.
struct region {
  const std::byte* base = nullptr;
  std::size_t size = 0;

  [[nodiscard]] bool known() const noexcept { return base != nullptr; }
  // [p, p + n) lies inside the region (always true when the region is unknown).
  [[nodiscard]] bool contains(const void* p, std::size_t n) const noexcept {
    if (!base) return true;
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    const auto b = reinterpret_cast<std::uintptr_t>(base);
    return a >= b && a - b <= size && n <= size - (a - b);
  }
};

}  // namespace gpufeed::detail::lmdb
