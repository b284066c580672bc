// gpufeed::detail — the consumer's side of the loader: the ready queue that orders finished
// batches by sequence, the accounting of batches the consumer holds, and the views a delivered
// batch is assembled from. No thread of its own, no template: testable alone.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/batch_view.hpp"
#include "gpufeed/detail/loader/slot_layout.hpp"
#include "gpufeed/detail/loader/types.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::loading {

// The view of a batch described by `m` laid out as `l` at `base` (host or target memory).
inline batch_view view_at(const batch_meta& m, const slot_layout& l, std::byte* base,
                          std::byte* output, bool labels) noexcept {
  batch_view v;
  static_cast<batch_meta&>(v) = m;
  v.data = slot_layout::data(base, l);
  v.offsets = slot_layout::offsets(base, l);
  v.labels = labels ? slot_layout::labels(base, l) : nullptr;
  v.indices = slot_layout::indices(base, l);
  v.output = m.output_bytes ? output : nullptr;
  return v;
}

class ready_queue {
 public:
  using clock = std::chrono::steady_clock;
  struct taken {
    ready_entry entry;
    std::size_t ready_now = 0;  // entries that were ready (the consumer's lead)
  };
  struct held_mark {
    clock::time_point at;
    std::uint64_t sequence = 0;
  };

  // At most `max_held` batches out at once, each holding one of `tickets` target slots.
  ready_queue(std::size_t max_held, std::size_t tickets) : max_held_(max_held), held_(tickets) {}

  // A worker (or the planner, for a batch that failed at planning) finished this batch.
  void put(ready_entry e) {
    {
      std::lock_guard lock(mutex_);
      ready_.emplace(e.meta.sequence, std::move(e));
    }
    cv_.notify_all();
  }
  // The planner's last batch has sequence `end` - 1.
  void end_at(std::uint64_t end) {
    {
      std::lock_guard lock(mutex_);
      end_ = end;
    }
    cv_.notify_all();
  }
  void stop() noexcept {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    cv_.notify_all();
  }

  // Waits for the next batch in sequence; nullopt once the planner's last one was taken. Throws
  // config_error when the consumer already holds max_held batches, cancelled_error once stopped.
  // A batch taken without an error counts as held until released() or unheld().
  std::optional<taken> take() {
    std::unique_lock lock(mutex_);
    if (out_ >= max_held_)
      throw config_error("the consumer holds " + std::to_string(out_) +
                         " batches; release one before asking for the next (or raise "
                         "max_held_batches)");
    cv_.wait(lock, [&] { return stopped_ || ready_.count(next_) || (end_ && next_ >= *end_); });
    if (end_ && next_ >= *end_) return std::nullopt;
    if (stopped_) throw cancelled_error("the loader was stopped");
    taken t;
    t.ready_now = ready_.size();
    auto it = ready_.find(next_);
    t.entry = std::move(it->second);
    ready_.erase(it);
    ++next_;
    last_ = t.entry.meta;
    if (!t.entry.error) ++out_;
    return t;
  }
  // The batch in target slot `ticket` was handed to the consumer now.
  void handed_out(std::size_t ticket, std::uint64_t sequence) {
    std::lock_guard lock(mutex_);
    held_[ticket] = held_mark{clock::now(), sequence};
  }
  // A taken batch could not be handed out after all.
  void unheld() noexcept {
    std::lock_guard lock(mutex_);
    --out_;
  }
  // The batch in `ticket` was released: when it was handed out.
  held_mark released(std::size_t ticket) noexcept {
    std::lock_guard lock(mutex_);
    --out_;
    return held_[ticket];
  }
  // The last batch take() returned (error or not), if any.
  [[nodiscard]] std::optional<batch_meta> last_taken() const {
    std::lock_guard lock(mutex_);
    return last_;
  }

 private:
  std::size_t max_held_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::uint64_t, ready_entry> ready_;
  std::uint64_t next_ = 0;
  std::optional<std::uint64_t> end_;
  std::optional<batch_meta> last_;
  std::size_t out_ = 0;
  std::vector<held_mark> held_;
  bool stopped_ = false;
};

}  // namespace gpufeed::detail::loading
