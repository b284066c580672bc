// gpufeed — where LMDB mapped a shard's data file, so every key and value pointer LMDB hands out
// can be checked against the bytes the file really has.
//
// Why: LMDB trusts its pages. A damaged overflow page can claim a value larger than the file, and
// touching mapped bytes past the end of the file raises SIGBUS. LMDB does not publish its map's
// address (MDB_envinfo::me_mapaddr is only set with MDB_FIXEDMAP), so on Linux we find the
// mapping that contains a pointer LMDB returned in /proc/self/maps: its start minus its file
// offset is the map's base. Elsewhere the region is unknown and only sizes are checked.
#pragma once

#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
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
