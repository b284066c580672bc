// gpufeed::detail::device_decode — the host's record of the device cache of decoded units
// (docs/design.md, "GPU decode in the loader"). No CUDA: the device memory is an arena of
// `slots` equal places of `slot_bytes`, and this directory says which unit (a source's decode
// unit: an HDF5 band of chunks) each place holds, for which batch, and who still needs it.
//
// Ordering contract. Batches are numbered by their sequence; their device work (decode of the
// units they stage, then the gather of their records) is submitted to ONE device stream in
// sequence order (submitted() in that order). So a batch may gather from a unit staged by an
// earlier batch or by itself: that decode runs before its gather. A unit staged by a LATER batch
// (its workers ran ahead) is staged again by the earlier one, into the same place: the later
// batch's decode then writes the same bytes again, after every reader before it.
//
// A place is reused only when no batch planned and not yet submitted gathers from it (its pins):
// every later use of the place is submitted after them. A unit whose decode failed on the device
// is forgotten (failed()); batches that gathered from it learn it through poisoned().
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpufeed::detail::device_decode {

// One use of a place: its index and how many units it had held before this one.
struct unit_ref {
  std::uint32_t place = 0;
  std::uint32_t generation = 0;
  friend bool operator<(const unit_ref& a, const unit_ref& b) noexcept {
    return a.place != b.place ? a.place < b.place : a.generation < b.generation;
  }
  friend bool operator==(const unit_ref&, const unit_ref&) = default;
};

class unit_directory {
 public:
  enum class answer {
    resident,  // gather from it: decoded by an earlier batch's work, or being staged by this one
    stage,     // the caller stages it into its batch now, then calls staged() or stage_failed()
    no_room,   // every place is pinned, or its staging failed: read the record on the host
  };
  struct claim {
    answer what = answer::no_room;
    unit_ref ref;
    std::uint64_t offset = 0;  // the place's first byte in the device cache
  };

  unit_directory(std::size_t places, std::uint64_t place_bytes)
      : place_bytes_(place_bytes), places_(places) {
    for (std::size_t p = places; p-- > 0;) free_.push_back(static_cast<std::uint32_t>(p));
  }
  unit_directory(const unit_directory&) = delete;
  unit_directory& operator=(const unit_directory&) = delete;

  [[nodiscard]] std::uint64_t place_bytes() const noexcept { return place_bytes_; }
  [[nodiscard]] std::size_t places() const noexcept { return places_.size(); }

  // Batch `batch` needs unit `key`. Pins the unit's place for the batch (once per batch: `pins`
  // collects the batch's units, released by submitted()). Waits while another task stages it.
  // Calls for one batch share `pins`, which this lock guards.
  claim acquire(std::uint64_t key, std::uint64_t batch, std::vector<unit_ref>& pins) {
    std::unique_lock lock(mutex_);
    for (;;) {
      auto it = units_.find(key);
      if (it == units_.end()) break;
      place& p = places_[it->second];
      if (p.staging) {  // another task is reading it: its outcome decides
        cv_.wait(lock);
        continue;
      }
      pin(it->second, batch, pins);
      claim c{answer::resident, {it->second, p.generation}, offset_of(it->second)};
      if (p.decoded_by > batch) {  // staged by a later batch: stage it again, decoded before
        p.staging = true;
        p.decoded_by = batch;
        c.what = answer::stage;
      }
      return c;
    }
    const claim c = stage_new(key, batch, pins);
    if (c.what == answer::no_room) ++no_room_;
    return c;
  }

  // Batch `batch` stages unit `key` ahead of its need (sequential order stages the bands after
  // one it must stage, so the device decodes many units per launch): a stage claim, as
  // acquire's and pinned for the batch, when no place holds the unit and one can be had without
  // waiting. `resident` (nothing pinned) when a place holds it or it is being staged, whichever
  // batch decodes it: staging ahead never waits and never stages a unit again. `no_room` when
  // every place is pinned (not counted as a refusal: no record was sent to the host).
  claim acquire_ahead(std::uint64_t key, std::uint64_t batch, std::vector<unit_ref>& pins) {
    std::lock_guard lock(mutex_);
    if (units_.count(key)) return claim{answer::resident, {}, 0};
    const claim c = stage_new(key, batch, pins);
    if (c.what == answer::stage) ++staged_ahead_;
    return c;
  }

  // The caller's staging of `r` is in its batch: tasks waiting for it gather from it.
  void staged(unit_ref r) {
    {
      std::lock_guard lock(mutex_);
      places_[r.place].staging = false;
    }
    cv_.notify_all();
  }
  // The caller could not stage `r` (its bytes could not be read or planned, or the batch had no
  // room left for them): the unit is forgotten, and its readers take the host path.
  void stage_failed(unit_ref r) {
    {
      std::lock_guard lock(mutex_);
      place& p = places_[r.place];
      p.staging = false;
      if (p.generation == r.generation && p.held) forget(r.place);
    }
    cv_.notify_all();
  }

  // The batch that pinned `pins` was submitted (in sequence order): its places may be reused.
  void submitted(const std::vector<unit_ref>& pins) noexcept {
    std::lock_guard lock(mutex_);
    for (const unit_ref& r : pins) {
      const std::uint32_t at = r.place;
      place& p = places_[at];
      if (p.pins > 0 && --p.pins == 0 && p.held) lru_push(at);
      if (p.pins == 0 && !p.held) release_place(at);
    }
  }

  // The device could not decode `r`: forget it (later batches stage it again, and fail the same
  // way on the host, which names the record), and remember it for poisoned().
  void failed(unit_ref r) {
    std::lock_guard lock(mutex_);
    poisoned_.insert(r);
    place& p = places_[r.place];
    if (p.generation == r.generation && p.held) forget(r.place);
  }
  // Whether a batch that gathered from `refs` read a unit whose decode failed.
  [[nodiscard]] bool poisoned(const std::vector<unit_ref>& refs) const {
    std::lock_guard lock(mutex_);
    if (poisoned_.empty()) return false;
    for (const unit_ref& r : refs)
      if (poisoned_.count(r)) return true;
    return false;
  }

  // Units staged (one per decode asked of the device) and claims refused for want of room.
  [[nodiscard]] std::uint64_t staged_units() const {
    std::lock_guard lock(mutex_);
    return staged_units_;
  }
  [[nodiscard]] std::uint64_t no_room() const {
    std::lock_guard lock(mutex_);
    return no_room_;
  }
  // Of staged_units(), those staged ahead of their need (acquire_ahead).
  [[nodiscard]] std::uint64_t staged_ahead() const {
    std::lock_guard lock(mutex_);
    return staged_ahead_;
  }
  // The most places that have held a unit at once.
  [[nodiscard]] std::size_t peak_places() const {
    std::lock_guard lock(mutex_);
    return peak_;
  }

 private:
  struct place {
    std::uint64_t key = 0;
    std::uint64_t decoded_by = 0;  // the earliest batch whose work decodes it
    std::uint64_t pinned_by = ~std::uint64_t{0};  // the last batch that pinned it
    std::uint32_t generation = 0;
    std::uint32_t pins = 0;  // batches planned, not yet submitted, that gather from it
    bool held = false;       // holds units_[key]
    bool staging = false;
    bool listed = false;     // on lru_
    bool free = true;        // on free_
    std::list<std::uint32_t>::iterator in_lru;
  };

  std::uint64_t offset_of(std::uint32_t at) const noexcept { return at * place_bytes_; }

  void pin(std::uint32_t at, std::uint64_t batch, std::vector<unit_ref>& pins) {
    place& p = places_[at];
    if (p.pinned_by == batch && p.pins > 0) return;
    p.pinned_by = batch;
    if (p.pins++ == 0 && p.listed) {
      lru_.erase(p.in_lru);
      p.listed = false;
    }
    pins.push_back(unit_ref{at, p.generation});
  }

  // Unit `key`, held nowhere, given a place staged by `batch` and pinned for it; no_room when
  // no place can be had. Under mutex_.
  claim stage_new(std::uint64_t key, std::uint64_t batch, std::vector<unit_ref>& pins) {
    const std::optional<std::uint32_t> at = take_place();
    if (!at) return {};
    place& p = places_[*at];
    p.key = key;
    p.held = true;
    p.staging = true;
    p.decoded_by = batch;
    ++p.generation;
    units_[key] = *at;
    pin(*at, batch, pins);
    ++staged_units_;
    return claim{answer::stage, {*at, p.generation}, offset_of(*at)};
  }

  // A free place, else the least recently released unpinned unit's.
  std::optional<std::uint32_t> take_place() {
    if (free_.empty() && !lru_.empty()) forget(lru_.front());
    if (free_.empty()) return std::nullopt;
    const std::uint32_t at = free_.back();
    free_.pop_back();
    places_[at].free = false;
    ++in_use_;
    if (in_use_ > peak_) peak_ = in_use_;
    return at;
  }
  void lru_push(std::uint32_t at) {
    place& p = places_[at];
    p.in_lru = lru_.insert(lru_.end(), at);
    p.listed = true;
  }
  // Drops the unit a place holds; the place is free once unpinned.
  void forget(std::uint32_t at) {
    place& p = places_[at];
    units_.erase(p.key);
    p.held = false;
    if (p.listed) {
      lru_.erase(p.in_lru);
      p.listed = false;
    }
    if (p.pins == 0) release_place(at);
  }
  void release_place(std::uint32_t at) {
    place& p = places_[at];
    if (p.listed || p.held || p.free) return;
    p.free = true;
    free_.push_back(at);
    --in_use_;
  }

  std::uint64_t place_bytes_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<place> places_;
  std::vector<std::uint32_t> free_;
  std::list<std::uint32_t> lru_;  // unpinned units, least recently released first
  std::unordered_map<std::uint64_t, std::uint32_t> units_;
  std::set<unit_ref> poisoned_;
  std::size_t in_use_ = 0, peak_ = 0;
  std::uint64_t staged_units_ = 0, staged_ahead_ = 0, no_room_ = 0;
};

}  // namespace gpufeed::detail::device_decode
