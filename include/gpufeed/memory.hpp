// gpufeed — host memory resources (std::pmr).
//
// All of gpufeed's large host buffers (batch slots, staging) come from a std::pmr::memory_resource
// so the kind of memory can be swapped without touching the pipeline: pinned memory on GPU
// targets (gpufeed::cuda::pinned_resource, in include/gpufeed/cuda/), pageable memory on the host
// target, and a counting wrapper in tests and telemetry to prove the budget never grows.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory_resource>
#include <new>
#include <utility>

namespace gpufeed {

// Plain pageable memory from the global aligned operator new. Alignment is raised to at least
// 64 bytes (a cache line) so records packed at offset 0 never share a line with other data.
class pageable_resource final : public std::pmr::memory_resource {
 public:
  static pageable_resource* instance() noexcept {
    static pageable_resource r;
    return &r;
  }

 private:
  static constexpr std::size_t min_alignment = 64;
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    return ::operator new(bytes, std::align_val_t{std::max(alignment, min_alignment)});
  }
  void do_deallocate(void* p, std::size_t, std::size_t alignment) noexcept override {
    ::operator delete(p, std::align_val_t{std::max(alignment, min_alignment)});
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
};

// Forwards to an upstream resource and counts what passes through. Thread-safe. Used to report
// (and in tests, to assert) that a loader's pinned bytes are allocated once and stay flat.
class counting_resource final : public std::pmr::memory_resource {
 public:
  explicit counting_resource(std::pmr::memory_resource* upstream = pageable_resource::instance())
      noexcept
      : upstream_(upstream) {}

  [[nodiscard]] std::size_t bytes_in_use() const noexcept { return in_use_.load(); }
  [[nodiscard]] std::size_t peak_bytes() const noexcept { return peak_.load(); }
  [[nodiscard]] std::size_t allocations() const noexcept { return allocations_.load(); }
  [[nodiscard]] std::size_t deallocations() const noexcept { return deallocations_.load(); }
  [[nodiscard]] std::pmr::memory_resource* upstream() const noexcept { return upstream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = upstream_->allocate(bytes, alignment);
    allocations_.fetch_add(1);
    const std::size_t now = in_use_.fetch_add(bytes) + bytes;
    std::size_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept override {
    upstream_->deallocate(p, bytes, alignment);
    deallocations_.fetch_add(1);
    in_use_.fetch_sub(bytes);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::pmr::memory_resource* upstream_;
  std::atomic<std::size_t> in_use_{0};
  std::atomic<std::size_t> peak_{0};
  std::atomic<std::size_t> allocations_{0};
  std::atomic<std::size_t> deallocations_{0};
};

// One buffer from a memory resource, released to it on destruction. Move-only.
class resource_buffer {
 public:
  resource_buffer() noexcept = default;
  resource_buffer(std::pmr::memory_resource* mr, std::size_t bytes, std::size_t alignment = 4096)
      : mr_(mr), bytes_(bytes), alignment_(alignment),
        data_(bytes ? static_cast<std::byte*>(mr->allocate(bytes, alignment)) : nullptr) {}
  resource_buffer(resource_buffer&& o) noexcept { swap(o); }
  resource_buffer& operator=(resource_buffer&& o) noexcept {
    resource_buffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  resource_buffer(const resource_buffer&) = delete;
  resource_buffer& operator=(const resource_buffer&) = delete;
  ~resource_buffer() {
    if (data_) mr_->deallocate(data_, bytes_, alignment_);
  }

  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  void swap(resource_buffer& o) noexcept {
    std::swap(mr_, o.mr_);
    std::swap(bytes_, o.bytes_);
    std::swap(alignment_, o.alignment_);
    std::swap(data_, o.data_);
  }

 private:
  std::pmr::memory_resource* mr_ = nullptr;
  std::size_t bytes_ = 0;
  std::size_t alignment_ = 0;
  std::byte* data_ = nullptr;
};

}  // namespace gpufeed
