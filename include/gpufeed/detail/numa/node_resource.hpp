// gpufeed::detail::numa — a std::pmr resource whose allocations are mappings bound to one NUMA
// node (binding.hpp): the host target's slots, and, with pinning added by
// gpufeed::cuda::pinned_node_resource, the device target's.
#pragma once

#include <cstddef>
#include <memory_resource>
#include <mutex>
#include <vector>

#include "gpufeed/detail/numa/binding.hpp"

namespace gpufeed::detail::numa {

class node_resource : public std::pmr::memory_resource {
 public:
  // touch: fault every page at allocation (zeroing it) so it lands on the node now.
  explicit node_resource(int node, bool touch = true) noexcept : node_(node), touch_(touch) {}
  ~node_resource() override = default;  // every allocation must have been returned

  [[nodiscard]] int node() const noexcept { return node_; }
  // mbind's errno for the latest allocation that failed to bind, 0 when all bound.
  [[nodiscard]] int bind_error() const {
    std::lock_guard lock(mutex_);
    return bind_error_;
  }

 protected:
  // Hooks for a derived resource (pinning): after mapping, before unmapping. pin may throw: the
  // mapping is then released and the exception passes on.
  virtual void pin(void*, std::size_t) {}
  virtual void unpin(void*) noexcept {}

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    int err = 0;
    node_mapping m(bytes, alignment, node_, touch_, err);
    pin(m.base(), m.mapped_bytes());
    std::lock_guard lock(mutex_);
    if (err) bind_error_ = err;
    void* p = m.data();
    maps_.push_back(std::move(m));
    return p;
  }
  void do_deallocate(void* p, std::size_t, std::size_t) noexcept override {
    node_mapping gone;
    {
      std::lock_guard lock(mutex_);
      for (auto it = maps_.begin(); it != maps_.end(); ++it)
        if (it->data() == p) {
          gone = std::move(*it);
          maps_.erase(it);
          break;
        }
    }
    if (gone.base()) unpin(gone.base());
  }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override {
    return this == &o;
  }

  int node_;
  bool touch_;
  mutable std::mutex mutex_;
  std::vector<node_mapping> maps_;
  int bind_error_ = 0;
};

}  // namespace gpufeed::detail::numa
