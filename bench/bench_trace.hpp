// gpufeed-bench: the overlap timeline — the loader's Chrome trace (write_trace) plus one track
// for the model, so a plot shows loading, copies and compute on one time axis.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_result.hpp"

namespace bench {

// Adds the model's runs to `trace_json` (the loader's trace) as one more track. The trace's
// times are microseconds since the loader's own start, which it does not export; the model's
// are on the steady clock. They are aligned through the consumer: next() ends its "wait for
// batch" event just before returning, and the model's run() is called right after, so the median
// of (k-th run() call - k-th wait's end) over the first batches is the trace's origin.
inline std::string with_model_track(const std::string& trace_json, const model& m, bool device) {
  nlohmann::json j = nlohmann::json::parse(trace_json);
  auto& events = j.at("traceEvents");
  int consumer = -1, max_tid = -1;
  for (const auto& e : events) {
    max_tid = std::max(max_tid, e.value("tid", -1));
    if (e.value("name", "") == "thread_name" && e.at("args").value("name", "") == "consumer")
      consumer = e.value("tid", -1);
  }
  std::vector<double> wait_end_us;
  for (const auto& e : events)
    if (e.value("tid", -2) == consumer && e.value("name", "") == "wait for batch")
      wait_end_us.push_back(e.value("ts", 0.0) + e.value("dur", 0.0));
  std::sort(wait_end_us.begin(), wait_end_us.end());
  const auto& launches = m.launches();
  std::vector<double> diffs;
  for (std::size_t k = 0; k < std::min<std::size_t>({launches.size(), wait_end_us.size(), 64}); ++k)
    diffs.push_back(static_cast<double>(launches[k]) / 1e3 - wait_end_us[k]);
  if (diffs.empty()) return trace_json;  // nothing to align with: leave the trace as it is
  std::nth_element(diffs.begin(), diffs.begin() + static_cast<std::ptrdiff_t>(diffs.size() / 2),
                   diffs.end());
  const double origin_us = diffs[diffs.size() / 2];

  const int tid = max_tid + 1;
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", tid},
                    {"args", {{"name", device ? "model (GPU kernel)" : "model (consumer thread)"}}}});
  events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 1}, {"tid", tid},
                    {"args", {{"sort_index", tid}}}});
  const auto spans = m.spans();
  for (std::size_t k = 0; k < spans.size(); ++k) {
    const double ts = static_cast<double>(spans[k].first) / 1e3 - origin_us;
    const double dur = static_cast<double>(spans[k].second - spans[k].first) / 1e3;
    events.push_back({{"name", "model"}, {"ph", "X"}, {"pid", 1}, {"tid", tid}, {"ts", ts},
                      {"dur", dur}, {"args", {{"batch", k}}}});
  }
  return j.dump() + "\n";
}

}  // namespace bench
