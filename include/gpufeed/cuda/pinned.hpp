// gpufeed::cuda — page-locked ("pinned") host memory: a move-only buffer and a std::pmr resource.
//
// Pinned memory is what makes host-to-device copies both fast (several times the pageable rate:
// docs/design.md, "One H2D copy per batch") and truly asynchronous: cudaMemcpyAsync from pageable
// memory is staged by the driver and does not overlap the caller. It is a scarce, expensive
// resource (allocation takes milliseconds and locks physical pages), so gpufeed allocates it once
// per loader and never grows it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <memory_resource>
#include <utility>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/detail/memory_block.hpp"
#include "gpufeed/detail/numa/node_resource.hpp"

namespace gpufeed::cuda {

class pinned_buffer : public detail::memory_block<cudaFreeHost, detail::cuda_free_host_name> {
 public:
  pinned_buffer() noexcept = default;
  explicit pinned_buffer(std::size_t bytes) {
    if (bytes) {
      void* p = nullptr;
      GPUFEED_CUDA_TRY(cudaMallocHost(&p, bytes));
      memory_block::operator=(memory_block(p, bytes));
    }
  }
};

// std::pmr resource over cudaMallocHost/cudaFreeHost. cudaMallocHost sub-allocates: its pointers
// are 256-byte aligned but not page aligned (observed with CUDA 13). Larger alignments are
// met by over-allocating and keeping the original pointer just below the aligned block. Two
// pinned_resource objects are interchangeable (any may free the other's memory).
class pinned_resource final : public std::pmr::memory_resource {
 public:
  static pinned_resource* instance() noexcept {
    static pinned_resource r;
    return &r;
  }

 private:
  static constexpr std::size_t native_alignment = 256;

  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = nullptr;
    if (alignment <= native_alignment) {
      GPUFEED_CUDA_TRY(cudaMallocHost(&p, bytes == 0 ? 1 : bytes));
      if (reinterpret_cast<std::uintptr_t>(p) % alignment == 0) return p;
      GPUFEED_CUDA_LOG(cudaFreeHost(p));
      throw config_error("pinned_resource: cudaMallocHost memory is not aligned to " +
                         std::to_string(alignment) + " bytes");
    }
    GPUFEED_CUDA_TRY(cudaMallocHost(&p, bytes + alignment + sizeof(void*)));
    const std::uintptr_t raw = reinterpret_cast<std::uintptr_t>(p) + sizeof(void*);
    const std::uintptr_t aligned = (raw + alignment - 1) / alignment * alignment;
    reinterpret_cast<void**>(aligned)[-1] = p;
    return reinterpret_cast<void*>(aligned);
  }
  void do_deallocate(void* p, std::size_t, std::size_t alignment) noexcept override {
    if (alignment > native_alignment) p = static_cast<void**>(p)[-1];
    GPUFEED_CUDA_LOG(cudaFreeHost(p));
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return dynamic_cast<const pinned_resource*>(&other) != nullptr;
  }
};

// Pinned memory on one NUMA node: an anonymous mapping bound to the node with mbind (MPOL_BIND)
// before any page exists, then page-locked with cudaHostRegister (portable: usable by every
// device's context, so loaders for several GPUs in one process may share the process), which
// faults every page under that binding. Not cudaMallocHost after binding the allocating thread:
// cudaMallocHost sub-allocates from the driver's pool (its pointers are 256-byte, not page,
// aligned), so a slot may come from a block faulted earlier for another loader on another node,
// and a thread policy would have to be set and restored around a call that also allocates the
// driver's own bookkeeping. A mapping of our own is bound per range, and move_pages can check
// where it went (loader_stats::numa).
class pinned_node_resource final : public gpufeed::detail::numa::node_resource {
 public:
  explicit pinned_node_resource(int node) : node_resource(node, /*touch=*/false) {}

 private:
  void pin(void* p, std::size_t bytes) override {
    GPUFEED_CUDA_TRY(cudaHostRegister(p, bytes, cudaHostRegisterPortable));
  }
  void unpin(void* p) noexcept override { GPUFEED_CUDA_LOG(cudaHostUnregister(p)); }
};

}  // namespace gpufeed::cuda
