// gpufeed::detail::numa — a loader's NUMA placement from decision to report: chooses the node
// (policy.hpp) from loader_config::numa and the target, supplies the staging resource bound to
// it, checks the slots' pages with move_pages, binds each planner and worker thread to the
// node's cores, and reports it all as numa_stats.
#pragma once

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <memory_resource>
#include <string>

#include "gpufeed/detail/numa/binding.hpp"
#include "gpufeed/detail/numa/policy.hpp"
#include "gpufeed/detail/numa/topology.hpp"
#include "gpufeed/numa.hpp"

namespace gpufeed::detail::numa {

class loader_placement {
 public:
  // bus_id: the target device's PCI bus id, "" for the host target.
  loader_placement(const numa_setting& s, const std::string& target, const std::string& bus_id,
                   const std::filesystem::path& root = "/")
      : mode_(mode_name(s.how)), chosen_(decide(s, read_topology(root), target, bus_id, root)) {}

  [[nodiscard]] int node() const noexcept { return chosen_.node; }

  // The resource staging slots come from: `placed` (the engine's memory on node(), owned here
  // from now on) when a node was chosen and the engine could place it, else `fallback`.
  std::pmr::memory_resource* staging(std::unique_ptr<std::pmr::memory_resource> placed,
                                     std::pmr::memory_resource* fallback, bool user_memory) {
    if (chosen_.node < 0) return fallback;
    if (user_memory) {
      chosen_.reason += "; slots come from loader_config::staging_memory: not placed";
      return fallback;
    }
    if (!placed) {
      chosen_.reason += "; this target's engine cannot place its slots";
      return fallback;
    }
    memory_ = std::move(placed);
    slots_bound_ = true;
    return memory_.get();
  }

  // After allocation: where one slot's pages are.
  void check_slot(const void* p, std::size_t bytes) {
    if (!slots_bound_) return;
    const page_census c = census(p, bytes, chosen_.node);
    pages_ += c.pages;
    on_node_ += c.on_node;
    all_single_ = all_single_ && c.pages > 0 && c.single_node == chosen_.node;
  }

  // On each planner and worker thread, before it works.
  void bind_thread() noexcept {
    threads_.fetch_add(1);
    if (chosen_.node >= 0 && bind_this_thread(chosen_.cpus)) bound_.fetch_add(1);
  }

  [[nodiscard]] numa_stats stats() const {
    numa_stats s;
    s.mode = mode_;
    s.node = chosen_.node;
    s.reason = chosen_.reason;
    s.cpus = chosen_.cpus.empty() ? std::string() : chosen_.cpulist;
    s.slots_bound = slots_bound_;
    s.slot_pages = pages_;
    s.slot_pages_on_node = on_node_;
    s.slot_node = slots_bound_ && all_single_ && pages_ > 0 ? chosen_.node : -1;
    s.threads = threads_.load();
    s.threads_bound = bound_.load();
    s.worker_node = s.threads > 0 && s.threads_bound == s.threads ? chosen_.node : -1;
    s.honoured = s.node >= 0 && s.slot_node == s.node && s.worker_node == s.node;
    return s;
  }

 private:
  std::string mode_;
  placement chosen_;
  std::unique_ptr<std::pmr::memory_resource> memory_;  // outlives the slots (declared first)
  bool slots_bound_ = false, all_single_ = true;
  std::uint64_t pages_ = 0, on_node_ = 0;
  std::atomic<std::size_t> threads_{0}, bound_{0};
};

}  // namespace gpufeed::detail::numa
