// gpufeed — the per-record transform stage: user code the loader's workers run on every record
// (decode, crop, flip, ...), writing its output straight into the record's place in the batch
// slot, with a random generator that depends on (seed, epoch, record) only.
//
//   loader_config c;
//   c.per_record = gpufeed::record_transform::fixed(224 * 224 * 3,
//       [](const gpufeed::record_input& in, std::span<std::byte> out, gpufeed::record_rng& rng) {
//         decode_and_crop(in.bytes, out, rng);  // writes exactly out.size() bytes
//       });
//
// The callable. `f(const record_input& in, std::span<std::byte> out, record_rng& rng)`:
//   in.bytes  the record as the source delivers it (its read() bytes). Valid during the call
//             only: it lies in the worker's scratch buffer, or in the source's own memory when
//             its reader hands out views (source.hpp's view_reader), never in the slot.
//             lmdb_source hands out none: its map reads are guarded against SIGBUS by jumping
//             out of the read, which cannot be done across user code, so values are copied.
//   out       the record's place in the staging slot (pinned memory on a device target):
//             output_bytes() bytes. Write there; nothing is copied afterwards on the host.
//   rng       this record's generator, seeded from (seed, epoch, in.index): the same values
//             whatever the worker count, chunking, prefetch, or resume point.
//   returns   fixed(): nothing (void), or the bytes written, which must be output_bytes();
//             bounded(): the bytes written, at most output_bytes().
// It runs on several worker threads at once (one record per call): it must be thread-safe and
// keep no state across records that affects its output, or the result depends on scheduling.
// It must be copyable (it is stored in a std::function): hold move-only state (a decoder pool)
// by pointer or shared_ptr, alive as long as the loader.
//
// Sizes and slot layout. Slots are sized from the output, not the source's records:
// batch_size x output_bytes() bytes of record data per slot (loader_config::slot_data_bytes
// must be left 0).
//   fixed(n)    every record is n bytes: batch::record_bytes() == n, record k at k * n, so
//               fixed-size GPU transforms (cuda::normalize_transform) apply as they are.
//   bounded(n)  workers write record k at k * n (its size is known only after the call); the
//               worker that completes the batch then packs the records back to back, so the
//               batch is laid out like any variable-size batch (record k at
//               [offsets()[k], offsets()[k+1]), record_bytes() == 0) and the H2D copy moves the
//               real bytes, not batch_size x n. The packing is one forward memmove of each
//               record after the first short one: at most one pass over the batch's output
//               bytes, on one thread, against a decode per record spread over all workers.
//
// Errors. An exception from the callable is a failure of that record and follows
// loader_config::on_error like a failed read: throw_error delivers it at its batch, skip leaves
// the record out, substitute replaces it by the nearest good record of the batch (earlier first)
// — for bounded outputs whatever that record's size, as sizes rarely repeat there. What is
// delivered (or logged in batch::skipped()) is a gpufeed::error of the same class for a
// gpufeed::error (another exception: gpufeed::error itself) whose message starts "record
// transform failed: " and whose context names the record's file (for sources with file_of(),
// source.hpp: found without opening any shard) and the global record index where the thrown
// error named none; the original is nested
// (std::rethrow_if_nested). A failed read is reported as the source's error, as without a
// transform. A callable that returns more than output_bytes() (bounded), or other than
// output_bytes() (fixed, when it returns a size), is a bug, not bad data: config_error naming
// the record, which fails its batch under every policy.
//
// Cost: the callable is stored type-erased (std::function), one indirect call per record —
// nanoseconds beside the microseconds to milliseconds of a JPEG decode it exists for, so a
// template parameter on the loader would buy nothing measurable. stats().workers[w]
// .transform_seconds is the time spent inside it (part of read_seconds).
//
// Composing with GPU transforms: the per-batch loader_config::transform runs after the batch's
// copy, on the stage's output. E.g. the stage writes uint8 CHW (planar) 3 x 224 x 224 records and
// cuda::normalize_transform<float> over channel_layout::chw turns them into float CHW in
// batch::output() (the normalizer maps element j to element j: write planar on the CPU to get
// planar floats; tests/loader/test_record_transform_device.cu shows it).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>

namespace gpufeed {

// A small counter-based generator: output n of the stream of key K is mix(K + n * gamma), with
// mix the SplitMix64 finaliser (Stafford's variant 13) and gamma = 0x9e3779b97f4a7c15 — i.e.
// SplitMix64 started at K, which passes BigCrush. The key is K = mix(mix(mix(seed + gamma) ^
// epoch) + record * gamma): every (seed, epoch, record) gets its own stream, independent of how
// records were spread over threads. Counter-based, so jumping ahead (discard) is O(1) and the
// state is two words. Not cryptographic.
//
// A UniformRandomBitGenerator (std::uniform_int_distribution and friends accept it). Those
// distributions' algorithms are the standard library's own (libstdc++ and libc++ differ), so
// for results that must match across standard libraries use uniform(), uniform_float() and
// below(), whose values are defined here and fixed: tests/loader/test_record_transform.cpp pins
// the first outputs, so a change to the stream is a visible, deliberate one.
class record_rng {
 public:
  using result_type = std::uint64_t;
  static constexpr std::uint64_t gamma = 0x9e3779b97f4a7c15ull;

  constexpr record_rng(std::uint64_t seed, std::uint64_t epoch, std::uint64_t record) noexcept
      : key_(mix(mix(mix(seed + gamma) ^ epoch) + record * gamma)) {}

  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return std::numeric_limits<result_type>::max(); }

  // The next 64 random bits.
  constexpr result_type operator()() noexcept { return mix(key_ + ++counter_ * gamma); }
  // Skips n outputs.
  constexpr void discard(std::uint64_t n) noexcept { counter_ += n; }

  // Uniform in [0, 1): the top 53 bits of the next output over 2^53.
  constexpr double uniform() noexcept {
    return static_cast<double>((*this)() >> 11) * 0x1.0p-53;
  }
  // Uniform in [lo, hi): lo + (hi - lo) * uniform().
  constexpr double uniform(double lo, double hi) noexcept { return lo + (hi - lo) * uniform(); }
  // Uniform in [0, 1) as float: the top 24 bits over 2^24.
  constexpr float uniform_float() noexcept {
    return static_cast<float>((*this)() >> 40) * 0x1.0p-24f;
  }
  // Uniform integer in [0, n), unbiased (Lemire's multiply-shift with rejection); 0 when n == 0.
  constexpr std::uint64_t below(std::uint64_t n) noexcept {
    if (n == 0) return 0;
    for (;;) {
      const std::uint64_t x = (*this)();
      const std::uint64_t low = x * n;  // the 128-bit product's low half
      if (low >= n || low >= (0 - n) % n) return mul_high(x, n);
    }
  }
  // True with probability p (p <= 0: never, p >= 1: always).
  constexpr bool chance(double p) noexcept { return uniform() < p; }

  // Outputs drawn so far.
  [[nodiscard]] constexpr std::uint64_t counter() const noexcept { return counter_; }

 private:
  // The high 64 bits of a * b (portable: no __int128, which -Wpedantic refuses).
  static constexpr std::uint64_t mul_high(std::uint64_t a, std::uint64_t b) noexcept {
    const std::uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
    const std::uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    const std::uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
  }
  static constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  std::uint64_t key_;
  std::uint64_t counter_ = 0;
};

// What a record transform is given besides its output place.
struct record_input {
  std::span<const std::byte> bytes;  // the record's bytes (valid during the call)
  std::uint64_t index = 0;           // global record index
  std::int64_t label = 0;            // the source's label; 0 when it has none
  std::uint64_t epoch = 0;           // the epoch of the batch it is read for
};

// The callable's type-erased form: returns the bytes written to `out`.
using record_function =
    std::function<std::size_t(const record_input&, std::span<std::byte>, record_rng&)>;

template <class F>
concept record_callable = std::copy_constructible<std::decay_t<F>> &&
    std::invocable<std::decay_t<F>&, const record_input&, std::span<std::byte>, record_rng&>;

// A per-record transform and its output size (see the top of this file). Empty by default: the
// loader then delivers the source's records as they are.
class record_transform {
 public:
  record_transform() = default;

  // Every output is exactly `output_bytes`. F returns void (it writes out.size() bytes) or the
  // bytes written (which must be out.size()).
  template <record_callable F>
  static record_transform fixed(std::size_t output_bytes, F&& f) {
    return record_transform(output_bytes, true, wrap(std::forward<F>(f)));
  }
  // Outputs of up to `max_output_bytes`; F returns the bytes it wrote.
  template <record_callable F>
    requires std::convertible_to<
        std::invoke_result_t<std::decay_t<F>&, const record_input&, std::span<std::byte>,
                             record_rng&>,
        std::size_t>
  static record_transform bounded(std::size_t max_output_bytes, F&& f) {
    return record_transform(max_output_bytes, false, record_function(std::forward<F>(f)));
  }

  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(fn_); }
  // The fixed output size, or the bound; 0 when empty.
  [[nodiscard]] std::size_t output_bytes() const noexcept { return fn_ ? bytes_ : 0; }
  [[nodiscard]] bool is_fixed() const noexcept { return fixed_; }

  // Runs the callable: the bytes it wrote to `out`.
  std::size_t operator()(const record_input& in, std::span<std::byte> out,
                         record_rng& rng) const {
    return fn_(in, out, rng);
  }

 private:
  record_transform(std::size_t bytes, bool fixed, record_function fn)
      : fn_(std::move(fn)), bytes_(bytes), fixed_(fixed) {}

  template <class F>
  static record_function wrap(F&& f) {
    using R = std::invoke_result_t<std::decay_t<F>&, const record_input&, std::span<std::byte>,
                                   record_rng&>;
    if constexpr (std::is_void_v<R>) {
      return [g = std::forward<F>(f)](const record_input& in, std::span<std::byte> out,
                                      record_rng& rng) mutable -> std::size_t {
        g(in, out, rng);
        return out.size();
      };
    } else {
      static_assert(std::convertible_to<R, std::size_t>,
                    "record_transform::fixed: the callable returns void or the bytes written");
      return record_function(std::forward<F>(f));
    }
  }

  record_function fn_;
  std::size_t bytes_ = 0;
  bool fixed_ = true;
};

}  // namespace gpufeed
