// gpufeed::detail::numa — binding memory and threads to a node, and reading back where they are:
// mbind / move_pages / get_mempolicy from libnuma (numaif.h), pthread_setaffinity_np.
#pragma once

#include <numaif.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpufeed/error.hpp"

namespace gpufeed::detail::numa {

inline std::size_t page_size() noexcept {
  static const std::size_t p = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

// A nodemask for mbind: bit `node` set; maxnode as the kernel wants it (bits + 1).
struct node_mask {
  std::vector<unsigned long> bits;
  unsigned long maxnode = 0;
  explicit node_mask(int node) {
    constexpr int per = static_cast<int>(8 * sizeof(unsigned long));
    bits.assign(static_cast<std::size_t>(node / per + 1), 0ul);
    bits[static_cast<std::size_t>(node / per)] |= 1ul << (node % per);
    maxnode = static_cast<unsigned long>(bits.size() * per + 1);
  }
};

// Binds [p, p + bytes) (page aligned) to `node` with MPOL_BIND, moving pages already faulted
// elsewhere (MPOL_MF_MOVE) and failing if some cannot be (MPOL_MF_STRICT). Returns errno, 0 on
// success.
inline int bind_range(void* p, std::size_t bytes, int node) noexcept {
  node_mask m(node);
  if (::mbind(p, bytes, MPOL_BIND, m.bits.data(), m.maxnode, MPOL_MF_MOVE | MPOL_MF_STRICT) != 0)
    return errno;
  return 0;
}

struct page_census {
  std::uint64_t pages = 0, on_node = 0;  // pages looked at; those on the node asked about
  int single_node = -1;                  // the node every page is on; -1 when mixed or absent
};

// Where the pages of [p, p + bytes) are (move_pages with no target nodes only reports). Looks
// at every page up to 65,536 pages and at an even sample of that many beyond.
inline page_census census(const void* p, std::size_t bytes, int node) {
  page_census c;
  const std::size_t ps = page_size();
  const auto first = reinterpret_cast<std::uintptr_t>(p) / ps * ps;
  const auto end = reinterpret_cast<std::uintptr_t>(p) + bytes;
  const std::size_t n = bytes ? (end - first + ps - 1) / ps : 0;
  const std::size_t look = std::min<std::size_t>(n, 65536);
  if (look == 0) return c;
  std::vector<void*> pages(look);
  std::vector<int> status(look, -1);
  for (std::size_t k = 0; k < look; ++k)
    pages[k] = reinterpret_cast<void*>(first + (n == look ? k : k * (n / look)) * ps);
  if (::move_pages(0, look, pages.data(), nullptr, status.data(), 0) != 0) return c;
  c.pages = look;
  bool same = true;
  for (std::size_t k = 0; k < look; ++k) {
    if (status[k] == node) ++c.on_node;
    same = same && status[k] >= 0 && status[k] == status[0];
  }
  c.single_node = same ? status[0] : -1;
  return c;
}

// Restricts the calling thread to `cpus` and reads the affinity back: true when it is now a
// non-empty subset of them.
inline bool bind_this_thread(const std::vector<int>& cpus) noexcept {
  if (cpus.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  if (::pthread_setaffinity_np(::pthread_self(), sizeof set, &set) != 0) return false;
  cpu_set_t now;
  CPU_ZERO(&now);
  if (::pthread_getaffinity_np(::pthread_self(), sizeof now, &now) != 0) return false;
  if (CPU_COUNT(&now) == 0) return false;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &now) && !CPU_ISSET(c, &set)) return false;
  return true;
}

// The cores the calling thread may run on (sched_getaffinity).
inline std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

// The calling thread's memory policy: its mode (MPOL_DEFAULT, MPOL_BIND, MPOL_PREFERRED,
// MPOL_INTERLEAVE, ...) and nodes; mode -1 when get_mempolicy fails.
struct memory_policy {
  int mode = -1;
  std::vector<int> nodes;
};
inline memory_policy thread_memory_policy() {
  memory_policy m;
  std::vector<unsigned long> mask(16, 0ul);  // 1024 nodes
  const unsigned long maxnode = mask.size() * 8 * sizeof(unsigned long);
  int mode = 0;
  if (::get_mempolicy(&mode, mask.data(), maxnode, nullptr, 0) != 0) return m;
  m.mode = mode;
  for (unsigned long b = 0; b < maxnode; ++b)
    if (mask[b / (8 * sizeof(unsigned long))] >> (b % (8 * sizeof(unsigned long))) & 1ul)
      m.nodes.push_back(static_cast<int>(b));
  return m;
}

// An anonymous mapping bound to a node before its first touch, so every page is faulted there.
// Move-only; unmapped on destruction.
class node_mapping {
 public:
  node_mapping() noexcept = default;
  // bytes rounded up to pages, `alignment` met by over-mapping. Throws std::bad_alloc when mmap
  // fails. bind_error receives mbind's errno (0: bound). Pages are faulted (zeroed) when
  // `touch`; otherwise the first touch (e.g. cudaHostRegister's) faults them under the binding.
  node_mapping(std::size_t bytes, std::size_t alignment, int node, bool touch, int& bind_error) {
    const std::size_t ps = page_size();
    const std::size_t extra = alignment > ps ? alignment : 0;
    len_ = (std::max<std::size_t>(bytes, 1) + extra + ps - 1) / ps * ps;
    void* m = ::mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<std::byte*>(m);
    const auto a = std::max(alignment, ps);
    data_ = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(base_) + a - 1) / a * a);
    bind_error = node >= 0 ? bind_range(base_, len_, node) : 0;
    if (touch) std::memset(base_, 0, len_);
  }
  node_mapping(node_mapping&& o) noexcept { swap(o); }
  node_mapping& operator=(node_mapping&& o) noexcept {
    node_mapping t(std::move(o));
    swap(t);
    return *this;
  }
  node_mapping(const node_mapping&) = delete;
  node_mapping& operator=(const node_mapping&) = delete;
  ~node_mapping() {
    if (base_) ::munmap(base_, len_);
  }
  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::byte* base() const noexcept { return base_; }
  [[nodiscard]] std::size_t mapped_bytes() const noexcept { return len_; }
  void swap(node_mapping& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(data_, o.data_);
    std::swap(len_, o.len_);
  }

 private:
  std::byte* base_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t len_ = 0;
};

}  // namespace gpufeed::detail::numa
