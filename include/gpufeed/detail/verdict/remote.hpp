// gpufeed::detail — the verdict's reading of remote I/O (verdict.hpp): what the requests of
// shards named by URLs came to, and whether the workers' reads were mostly waiting on them. It
// reads only loader_stats::remote (counts and times: never a URL or a credential).
#pragma once

#include <algorithm>
#include <string>

#include "gpufeed/detail/verdict/explain.hpp"
#include "gpufeed/stats.hpp"

namespace gpufeed::detail {

// Remote I/O is named when the workers' reads spent at least this share of their time waiting
// on requests (a unit fetch, or a record's own GET).
inline constexpr double remote_wait_worth_naming = 0.5;

// The share of the workers' read time spent waiting on remote requests (0 without remote stats).
inline double remote_wait_share(const loader_stats& s) {
  const double read = s.read_seconds();
  if (!s.remote || read <= 0) return 0;
  return std::min(1.0, s.remote->read_wait_seconds / read);
}

// The evidence line of remote reads; empty for a local source.
inline std::string remote_evidence(const loader_stats& s) {
  if (!s.remote) return {};
  const remote_stats& r = *s.remote;
  return fmt("remote: %.0f requests, ", static_cast<double>(r.requests)) +
         fmt("%.3f GB fetched for %.3f GB delivered", static_cast<double>(r.bytes_fetched) / 1e9,
             static_cast<double>(r.bytes_delivered) / 1e9) +
         fmt(" (%.2f x); latency p50 %.1f ms", r.fetch_ratio(), r.latency_p50_us() / 1e3) +
         fmt(", p99 %.1f ms", r.latency_p99_us() / 1e3) +
         fmt("; %.0f retries, ", static_cast<double>(r.retries)) +
         fmt("%.0f failures; workers waited on requests ", static_cast<double>(r.failures)) +
         fmt("%.1f %% of their read time", 100 * remote_wait_share(s)) +
         (r.unit_fetches ? fmt("; %.0f units fetched, ", static_cast<double>(r.unit_fetches)) +
                               fmt("%.0f of them ahead of their reads, ",
                                   static_cast<double>(r.unit_prefetches)) +
                               fmt("%.0f reads from a unit held", static_cast<double>(r.unit_hits))
                         : std::string());
}

// Remote I/O as the bottleneck (busy workers mostly waiting on requests): the sentence and the
// advice, or empty when the waits were not the larger part of the reads. `runqueue_seconds` is
// the workers' time runnable but waiting for a core: a request's wait includes it when the
// machine has fewer free cores than runnable threads (the reply is there, its thread not yet
// running), and that part is the cores' to answer for, not the store's. It is taken off the
// request wait before the share is weighed (all of it: the scheduler does not say which part
// fell inside requests), so an oversubscribed machine is named as such, not as slow remote I/O.
inline explanation explain_remote(const loader_stats& s, double workers, double runqueue_seconds) {
  const double share = remote_wait_share(s);
  const double read = s.read_seconds();
  const double network_share =
      read > 0 && s.remote
          ? std::max(0.0, s.remote->read_wait_seconds - std::max(0.0, runqueue_seconds)) / read
          : 0.0;
  if (network_share < remote_wait_worth_naming) return {};
  const remote_stats& r = *s.remote;
  explanation e;
  e.sentence = fmt("Remote I/O bounds throughput: workers spent %.0f %% of their reads waiting "
                   "on HTTP requests (latency p50 %.1f ms", 100 * share, r.latency_p50_us() / 1e3) +
               fmt(", p99 %.1f ms); the object store delivers %.3f GB/s.", r.latency_p99_us() / 1e3,
                   static_cast<double>(s.bytes) / s.elapsed_seconds / 1e9);
  if (s.order != "block_shuffled")
    e.suggestion = "use sample_order::block_shuffled: it fetches whole units of a few MiB with one "
                   "request each, once per epoch and ahead of the window, instead of a request "
                   "per record; ";
  e.suggestion += "raise workers to keep more requests in flight (each worker waits on one "
                  "request at a time; " + count_of(workers, "worker") + " now), or keep the "
                  "shards on node-local disk (a local copy or cache of the remote units)";
  return e;
}

}  // namespace gpufeed::detail
