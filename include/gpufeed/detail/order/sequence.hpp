// gpufeed::detail — an epoch's global sequence: position p of epoch e -> record, a bijection of
// [0, N) for every (seed, epoch), the same on every rank and at every world size.
//
//   sequential      p
//   shuffled        a keyed Feistel permutation of [0, N) (permutation.hpp), O(1) memory
//   block_shuffled  the units (units.hpp) in a keyed permuted order; consecutive groups of
//                   `window` permuted units form windows, and each window's records are shuffled
//                   together by a keyed permutation of the window. A window is read and decoded
//                   once: its records fill consecutive positions. Windows tumble (do not
//                   overlap), so position -> record stays O(log units) without replaying the
//                   epoch, which interleaved ranks and resume at another world size need.
// When every unit is one record (uncompressed data: each record decodes alone) the same
// sequence needs no table: the unit in slot s is the unit permutation of s, and the window of
// position p is p / window. block_shuffled is then as cheap per position as shuffled (two keyed
// permutations) and O(1) in memory. Otherwise block_shuffled keeps, per epoch, the permuted
// unit ids and the records before each (16 bytes per unit), built on the first lookup of an
// epoch under a mutex and kept for the two epochs looked up last (a batch's tasks, filled by
// the loader's workers in parallel, may straddle an epoch's end). Lookups hold the mutex only to take the epoch's table, not while they use it.
// A copy starts with its own empty cache, so the loader and a user's copy
// (loader::batch_sampler()) looking at different epochs do not rebuild each other's.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "gpufeed/detail/permutation.hpp"
#include "gpufeed/sample_order.hpp"

namespace gpufeed {
namespace detail {

class epoch_sequence {
 public:
  epoch_sequence() = default;
  // `window` is clamped to [1, units]; it matters only for block_shuffled.
  epoch_sequence(sample_order order, std::uint64_t records, std::uint64_t seed,
                 record_units units, std::uint64_t window)
      : order_(order), n_(records), seed_(seed), units_(std::move(units)),
        window_(std::clamp<std::uint64_t>(window, 1, std::max<std::uint64_t>(1, units_.size()))),
        cache_(std::make_shared<cache>()) {}

  epoch_sequence(const epoch_sequence& o)
      : order_(o.order_), n_(o.n_), seed_(o.seed_), units_(o.units_), window_(o.window_),
        cache_(std::make_shared<cache>()) {}
  epoch_sequence& operator=(const epoch_sequence& o) {
    if (this != &o) *this = epoch_sequence(o);
    return *this;
  }
  epoch_sequence(epoch_sequence&&) noexcept = default;
  epoch_sequence& operator=(epoch_sequence&&) noexcept = default;
  ~epoch_sequence() = default;

  [[nodiscard]] sample_order order() const noexcept { return order_; }
  [[nodiscard]] const record_units& units() const noexcept { return units_; }
  [[nodiscard]] std::uint64_t window() const noexcept { return window_; }

  // block_shuffled: windows per epoch, the window that holds position p (< N) of `epoch`, and
  // f(unit) for each unit of window w of `epoch` — what the planner advises the source to read
  // ahead (detail/loader/read_ahead.hpp).
  [[nodiscard]] std::uint64_t windows() const noexcept {
    return (units_.size() + window_ - 1) / window_;
  }
  [[nodiscard]] std::uint64_t window_of(std::uint64_t epoch, std::uint64_t p) const {
    if (unit_per_record()) return p / window_;
    const auto t = table_of(epoch);
    const epoch_table& c = *t;
    return slot_of(c, p, 0, c.before.size() - 1) / window_;
  }
  // Positions [first, second) of window w of `epoch` (w < windows()).
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> window_bounds(std::uint64_t epoch,
                                                                      std::uint64_t w) const {
    if (unit_per_record()) return {std::min(n_, w * window_), std::min(n_, (w + 1) * window_)};
    const auto t = table_of(epoch);
    const epoch_table& c = *t;
    const std::uint64_t last = c.before.size() - 1;
    return {c.before[std::min(last, w * window_)], c.before[std::min(last, (w + 1) * window_)]};
  }
  template <class F>
  void for_each_unit(std::uint64_t epoch, std::uint64_t w, F&& f) const {
    if (unit_per_record()) {
      const feistel_permutation units(n_, unit_key(epoch));
      for (std::uint64_t slot = w * window_; slot < std::min(n_, (w + 1) * window_); ++slot)
        f(units(slot));
      return;
    }
    const auto t = table_of(epoch);
    const epoch_table& c = *t;
    const std::uint64_t end = std::min<std::uint64_t>(c.unit.size(), (w + 1) * window_);
    for (std::uint64_t slot = w * window_; slot < end; ++slot) f(c.unit[slot]);
  }

  // out[k] = the record at position (first + k) mod N of `epoch`. Thread-safe. The positions
  // are cut into runs that neither wrap past the epoch's end nor (block_shuffled) leave a
  // window; each run's keyed permutation is computed for the whole run at once
  // (feistel_permutation::fill), and block_shuffled's units then looked up for the run.
  void fill(std::uint64_t epoch, std::uint64_t first, std::span<std::uint64_t> out) const {
    std::uint64_t p = first % n_;
    for (std::size_t done = 0; done < out.size();) {
      const auto part =
          static_cast<std::size_t>(std::min<std::uint64_t>(out.size() - done, n_ - p));
      fill_run(epoch, p, out.subspan(done, part));
      done += part;
      p = 0;
    }
  }

 private:
  struct epoch_table {
    std::uint64_t epoch = 0;
    std::vector<std::uint64_t> unit;    // unit at each permuted slot
    std::vector<std::uint64_t> before;  // records in the slots before each, then N
    // Units of `stride` records but the last one (storage blocks of uncompressed data), which
    // lies in slot short_slot with short_len records: slot_of is then arithmetic. 0: not so.
    std::uint64_t stride = 0, short_slot = 0, short_len = 0;
  };
  struct cache {
    std::mutex mutex;
    std::shared_ptr<const epoch_table> last, before_last;  // the two epochs looked up last
  };

  [[nodiscard]] std::uint64_t key(std::uint64_t epoch, std::uint64_t part) const noexcept {
    const std::uint64_t base = mix64(seed_ ^ mix64(epoch + 0x243f6a8885a308d3ull));
    return part == 0 ? base : mix64(base ^ mix64(part));  // part 0: shuffled's key
  }

  // Every unit is one record: no table (see the top).
  [[nodiscard]] bool unit_per_record() const noexcept { return units_.size() == n_; }

  // block_shuffled's key of the permutation of units.
  [[nodiscard]] std::uint64_t unit_key(std::uint64_t epoch) const noexcept {
    return key(epoch, std::numeric_limits<std::uint64_t>::max());
  }

  // block_shuffled's table of `epoch`, built once per epoch (O(units)) while no other thread
  // looks anything up; immutable once made, so callers use it without the mutex.
  std::shared_ptr<const epoch_table> table_of(std::uint64_t epoch) const {
    cache& c = *cache_;
    std::lock_guard lock(c.mutex);
    if (c.last && c.last->epoch == epoch) return c.last;
    if (c.before_last && c.before_last->epoch == epoch) {
      std::swap(c.last, c.before_last);
      return c.last;
    }
    auto t = std::make_shared<epoch_table>();
    const std::uint64_t u = units_.size();
    const feistel_permutation perm(u, unit_key(epoch));
    t->epoch = epoch;
    t->unit.resize(u);
    t->before.resize(u + 1);
    std::uint64_t sum = 0;
    const std::uint64_t stride = u ? units_.end(0) - units_.begin(0) : 0;
    bool uniform = stride > 0;
    for (std::uint64_t s = 0; s < u; ++s) {
      t->unit[s] = perm(s);
      t->before[s] = sum;
      const std::uint64_t len = units_.end(t->unit[s]) - units_.begin(t->unit[s]);
      sum += len;
      if (t->unit[s] + 1 == u) {
        t->short_slot = s;
        t->short_len = len;
        uniform = uniform && len <= stride && len > 0;
      } else {
        uniform = uniform && len == stride;
      }
    }
    t->before[u] = sum;
    if (uniform) t->stride = stride;
    c.before_last = std::move(c.last);
    c.last = std::move(t);
    return c.last;
  }

  // The slot s in [lo, hi) with before[s] <= p < before[s + 1] (p < N): a division for uniform
  // units, else a binary search (its branches cost as much as two permutations per position).
  static std::uint64_t slot_of(const epoch_table& c, std::uint64_t p, std::uint64_t lo,
                               std::uint64_t hi) noexcept {
    if (c.stride) {
      const std::uint64_t at_short = c.short_slot * c.stride;  // before[short_slot]
      if (p < at_short) return p / c.stride;
      if (p < at_short + c.short_len) return c.short_slot;
      return c.short_slot + 1 + (p - at_short - c.short_len) / c.stride;
    }
    const auto first = c.before.begin() + static_cast<std::ptrdiff_t>(lo);
    const auto last = c.before.begin() + static_cast<std::ptrdiff_t>(hi) + 1;
    return static_cast<std::uint64_t>(std::upper_bound(first, last, p) - c.before.begin()) - 1;
  }

  // fill() for positions [p, p + out.size()) of `epoch`, all below N.
  void fill_run(std::uint64_t epoch, std::uint64_t p, std::span<std::uint64_t> out) const {
    if (order_ == sample_order::sequential) {
      for (std::size_t k = 0; k < out.size(); ++k) out[k] = p + k;
      return;
    }
    if (order_ == sample_order::shuffled) {
      feistel_permutation(n_, key(epoch, 0)).fill(p, out);
      return;
    }
    if (unit_per_record()) {  // slot s holds unit (= record) units(s); windows are fixed
      const feistel_permutation units(n_, unit_key(epoch));
      for (std::size_t done = 0; done < out.size();) {
        const std::uint64_t at = p + done, win = at / window_, lo = win * window_;
        const std::uint64_t hi = std::min(n_, lo + window_);
        const auto run = out.subspan(
            done, static_cast<std::size_t>(std::min<std::uint64_t>(out.size() - done, hi - at)));
        feistel_permutation(hi - lo, key(epoch, win + 1)).fill(at - lo, run);
        for (auto& v : run) v += lo;
        units.map(run);
        done += run.size();
      }
      return;
    }
    const auto t = table_of(epoch);
    const epoch_table& c = *t;
    const std::uint64_t slots = c.before.size() - 1;
    for (std::size_t done = 0; done < out.size();) {
      const std::uint64_t at = p + done;
      const std::uint64_t win = slot_of(c, at, 0, slots) / window_;
      const std::uint64_t first_slot = win * window_;
      const std::uint64_t last = std::min(slots, (win + 1) * window_);
      const std::uint64_t lo = c.before[first_slot], hi = c.before[last];
      const auto run = out.subspan(
          done, static_cast<std::size_t>(std::min<std::uint64_t>(out.size() - done, hi - at)));
      feistel_permutation(hi - lo, key(epoch, win + 1)).fill(at - lo, run);  // offsets in window
      // Units of `stride` records throughout the window (the short unit elsewhere, or full):
      // the slot and the offset in it are a quotient and a remainder.
      const bool even = c.stride && (c.short_slot < first_slot || c.short_slot >= last ||
                                     c.short_len == c.stride);
      if (even && hi - lo <= divider::max_dividend && c.stride <= divider::max_dividend) {
        const divider by(c.stride);
        for (auto& v : run) {
          const std::uint64_t s = by.quotient(v);
          v = units_.begin(c.unit[first_slot + s]) + (v - s * c.stride);
        }
      } else {
        for (auto& v : run) {
          const std::uint64_t q = lo + v;
          const std::uint64_t slot = slot_of(c, q, first_slot, last);
          v = units_.begin(c.unit[slot]) + (q - c.before[slot]);
        }
      }
      done += run.size();
    }
  }

  // x / d by a multiply (Lemire, Kaser and Kurz, "Faster remainder by direct computation",
  // 2019: exact for dividends and divisors below 2^32), or a shift when d is a power of two.
  struct divider {
    static constexpr std::uint64_t max_dividend = 0xffffffffull;
    explicit divider(std::uint64_t d) noexcept
        : shift(std::has_single_bit(d) ? std::countr_zero(d) : -1),
          magic(shift < 0 ? ~std::uint64_t{0} / d + 1 : 0) {}
    // The high 64 bits of magic x x in two 32 x 32-bit halves (x < 2^32: neither product nor
    // their sum overflows), without a 128-bit type.
    [[nodiscard]] std::uint64_t quotient(std::uint64_t x) const noexcept {
      if (shift >= 0) return x >> shift;
      return ((magic >> 32) * x + (((magic & 0xffffffffull) * x) >> 32)) >> 32;
    }
    int shift;
    std::uint64_t magic;
  };

  sample_order order_ = sample_order::shuffled;
  std::uint64_t n_ = 0;
  std::uint64_t seed_ = 0;
  record_units units_;
  std::uint64_t window_ = 1;
  std::shared_ptr<cache> cache_;
};

}  // namespace detail
}  // namespace gpufeed
