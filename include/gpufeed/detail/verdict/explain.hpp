// gpufeed::detail — the verdict's explanations (verdict.hpp): number formatting, and the
// sentences and advice for decode amplification and for a per-record cost that bounds the
// workers. Each reads only loader_stats and returns words; diagnose() decides where they go.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>

#include "gpufeed/stats.hpp"

namespace gpufeed::detail {

inline std::string fmt(const char* f, double a) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}
inline std::string fmt(const char* f, double a, double b) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

// "1 worker", "14 workers".
inline std::string count_of(double n, const char* what) {
  return fmt("%.0f ", n) + what + (n == 1 ? "" : "s");
}

// A sentence for the summary and the advice that goes with it; both empty when there is
// nothing worth saying.
struct explanation {
  std::string sentence;
  std::string suggestion;
};

// Decode amplification worth naming: each delivered byte inflated at least this many.
inline constexpr double amplification_worth_naming = 2.0;

// Decode amplification, when the source reports decode_stats and records inflated many rows of
// chunk data each.
inline explanation explain_decode(const loader_stats& s) {
  if (!s.decode) return {};
  const decode_stats& d = *s.decode;
  const double amp = d.amplification();
  if (amp < amplification_worth_naming) return {};
  const double rec_rows = amp;  // decoded bytes per delivered byte = rows per record's row
  explanation e;
  e.sentence = fmt(" Decode amplification: each record inflated %.0f rows of chunk data "
                   "(%.3f GB decoded", rec_rows, static_cast<double>(d.decoded_bytes) / 1e9) +
               fmt(" for %.3f GB delivered).", static_cast<double>(d.delivered_bytes) / 1e9);
  std::string fix;
  if (s.order == "shuffled")
    fix = "use sample_order::block_shuffled: records of a window of decode units are shuffled "
          "together and each chunk is decoded once per epoch";
  else if (d.uncached_decodes > 0 || d.cache_peak_bytes >= d.cache_budget_bytes)
    fix = fmt("raise hdf5_options::decode_cache_bytes (budget %.0f MiB, ",
              static_cast<double>(d.cache_budget_bytes) / 1048576.0) +
          fmt("%.0f decodes found no room): chunks are decoded again when the window does not fit",
              static_cast<double>(d.uncached_decodes));
  if (!fix.empty()) fix += ", or ";
  // The chunk size that holds a few records: a repack that keeps the chunks the data already
  // has (pack's default 1 MiB) would change nothing.
  const double record_bytes =
      s.records ? static_cast<double>(s.bytes) / static_cast<double>(s.records) : 0.0;
  const double chunk_kib = std::max(4.0, 4 * record_bytes / 1024);
  fix += "repack into chunks of a few records: `gpufeed pack --from FILE.h5 --dataset NAME "
         "--compress lz4" + fmt(" --chunk-size %.0fKiB`", chunk_kib) +
         fmt(" (these chunks hold ~%.0f records each)", rec_rows);
  e.suggestion = fix;
  return e;
}

// Worker time per delivered record (their read time summed, over records), in seconds; 0 when
// unknown.
inline double worker_seconds_per_record(const loader_stats& s) {
  return s.records ? s.read_seconds() / static_cast<double>(s.records) : 0.0;
}

// A worker that copies records from memory moves several GB/s; one whose byte rate stays below
// this while it is saturated spends its time on each record's fixed cost (the call, bookkeeping,
// a small copy), not on bytes. Records at most this large are "small" for the advice.
inline constexpr double per_record_bound_gbps_per_worker = 1.0;
inline constexpr double small_record_bytes = 64 * 1024;

// The per-record cost, when saturated workers move few bytes per second each because every
// record costs them a fixed time: names the time per record and what amortises it. Only for
// records that were not decompressed (decoding has its own explanation).
inline explanation explain_per_record(const loader_stats& s) {
  const double per_record = worker_seconds_per_record(s);
  if (per_record <= 0 || (s.decode && s.decode->chunks_decoded)) return {};
  const double record_bytes = static_cast<double>(s.bytes) / static_cast<double>(s.records);
  const double worker_gbps = record_bytes / per_record / 1e9;
  if (record_bytes > small_record_bytes || worker_gbps >= per_record_bound_gbps_per_worker)
    return {};
  explanation e;
  e.sentence = fmt(" Each record costs a worker %.2f us for %.0f bytes", per_record * 1e6,
                   record_bytes) +
               fmt(" (%.0f records/s, %.3f GB/s per worker): the fixed cost per record, not "
                   "the bytes, bounds the rate.",
                   1.0 / per_record, worker_gbps);
  std::string fix = "amortise the per-record cost: pack small records together into larger "
                    "ones (e.g. rows of 16 KiB or more, split on the GPU), use larger batches";
  if (s.order == "shuffled")
    fix += ", or sample_order::block_shuffled or sequential order, which read runs of adjacent "
           "records";
  e.suggestion = fix;
  return e;
}

}  // namespace gpufeed::detail
