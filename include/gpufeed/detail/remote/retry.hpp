// gpufeed — when a failed HTTP request is tried again, and after how long.
//
// Transient failures (a timeout, a reset or refused connection, a truncated transfer with
// nothing usable in it, HTTP 408, 429 and 5xx, S3's 503 SlowDown) are tried again; every other
// answer is final. Attempts are bounded in number and in total time, whichever comes first, so
// a dead server fails a read in bounded time instead of holding a worker for ever.
//
// The wait before attempt k + 1 is "full jitter": uniform in [0, min(max_delay, base * 2^k)).
// Many workers retrying against one throttled server then spread out instead of returning in
// lock step, which is what a server shedding load (429, SlowDown) asks for.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <thread>

namespace gpufeed::detail::remote {

struct retry_policy {
  // Attempts per request in all (1: never try again).
  unsigned max_attempts = 6;
  // The first wait's bound; it doubles per attempt up to max_delay.
  std::chrono::milliseconds base_delay{100};
  std::chrono::milliseconds max_delay{5000};
  // No attempt starts once this much time has passed since the first began (nor a wait that
  // would end past it).
  std::chrono::milliseconds max_total{60000};
};

// The wait before the attempt after `failed` attempts (1 or more) under `p`: full jitter.
inline std::chrono::milliseconds backoff_delay(const retry_policy& p, unsigned failed) {
  thread_local std::minstd_rand rng(static_cast<std::uint32_t>(
      std::hash<std::thread::id>{}(std::this_thread::get_id()) ^
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())));
  const unsigned shift = std::min(failed - 1, 30u);
  const std::int64_t base = std::max<std::int64_t>(p.base_delay.count(), 0);
  const std::int64_t cap = std::min<std::int64_t>(std::max<std::int64_t>(p.max_delay.count(), 0),
                                                  base << std::min(shift, 20u));
  if (cap <= 0) return std::chrono::milliseconds(0);
  std::uniform_int_distribution<std::int64_t> pick(0, cap - 1);
  return std::chrono::milliseconds(pick(rng));
}

// The attempts of one request: whether another may start, and the wait before it.
class retry_budget {
 public:
  explicit retry_budget(const retry_policy& p) noexcept
      : policy_(p), start_(std::chrono::steady_clock::now()) {}

  // After a transient failure: the wait before the next attempt, or false when the policy's
  // attempts or time are spent (the failure is then final).
  [[nodiscard]] bool next(std::chrono::milliseconds& wait) {
    ++failed_;
    if (failed_ >= policy_.max_attempts) return false;
    wait = backoff_delay(policy_, failed_);
    const auto spent = std::chrono::steady_clock::now() - start_;
    return spent + wait < policy_.max_total;
  }
  // Attempts that failed so far (all of them once next() said false).
  [[nodiscard]] unsigned failures() const noexcept { return failed_; }

 private:
  retry_policy policy_;
  std::chrono::steady_clock::time_point start_;
  unsigned failed_ = 0;
};

}  // namespace gpufeed::detail::remote
