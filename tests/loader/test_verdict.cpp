// diagnose() on recorded (synthetic) stats: decode amplification and random reads are named with
// their figures and cures; no share of time above 100 % and no "(1 workers)"; the decode /
// pipeline call does not flip on stats either side of the old 75 % line; idle time before the
// consumer's first request does not count.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "gpufeed/loader.hpp"
#include "gpufeed/verdict.hpp"
#include "memory_source.hpp"

using namespace gpufeed;

namespace {

// A run where the consumer waited half its time: `workers` workers busy `busy` of their time,
// `cpu` of their read time on a CPU, the planner blocked `planner` of the run.
loader_stats recorded(std::size_t workers, double busy, double cpu, double planner) {
  loader_stats s;
  s.elapsed_seconds = 10;
  s.batches = 1000;
  s.records = 512'000;
  s.bytes = s.records * 16384;
  s.consumer_wait_seconds = 5;
  s.consumer_hold_seconds = 5;
  s.planner_wait_seconds = 10 * planner;
  s.ready_queue_capacity = 8;
  for (std::size_t k = 0; k < workers; ++k) {
    worker_stats w;
    w.read_seconds = 10 * busy;
    w.idle_seconds = 10 * (1 - busy);
    w.read_cpu_seconds = w.read_seconds * cpu;
    s.workers.push_back(w);
  }
  return s;
}

// Every "N %" figure in the text (digits, an optional fraction, a space, '%'). Scanned by hand:
// std::regex trips GCC 12's -Wmaybe-uninitialized inside libstdc++ under the sanitizer builds.
std::vector<double> percentages(const std::string& text) {
  std::vector<double> out;
  const auto digit = [&](std::size_t i) {
    return i < text.size() && text[i] >= '0' && text[i] <= '9';
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!digit(i) || (i > 0 && (digit(i - 1) || text[i - 1] == '.'))) continue;
    std::size_t j = i;
    while (digit(j)) ++j;
    if (j < text.size() && text[j] == '.' && digit(j + 1))
      for (++j; digit(j);) ++j;
    if (j + 1 < text.size() && text[j] == ' ' && text[j + 1] == '%')
      out.push_back(std::stod(text.substr(i, j - i)));
    i = j;
  }
  return out;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("decode amplification in full random order: named with figures, block_shuffled or repack") {
  loader_stats s = recorded(14, 0.97, 0.95, 0.9);
  s.order = "shuffled";
  decode_stats d;
  d.chunks_decoded = 512'000 * 64;
  d.decoded_bytes = s.bytes * 512;  // one 16 KiB row inflated 64 chunks of 512 rows x 64 columns
  d.delivered_bytes = s.bytes;
  d.records = s.records;
  d.cache_budget_bytes = 64u << 20;
  s.decode = d;
  const verdict v = diagnose(s, 16);
  MESSAGE(v.report());
  CHECK(v.stage == bottleneck::decode);
  CHECK(has(v.summary, "each record inflated 512 rows of chunk data"));
  CHECK(has(v.summary, "4294.967 GB decoded for 8.389 GB delivered"));
  CHECK(has(v.suggestion, "sample_order::block_shuffled"));
  CHECK(has(v.suggestion, "gpufeed pack --from FILE.h5 --dataset NAME --compress lz4"));
  CHECK(!has(v.suggestion, "raise workers"));
  CHECK(has(v.report(), "(512.0 x)"));

  // In a locality-aware order whose window overflows the budget: raise the budget.
  s.order = "sequential";
  s.decode->uncached_decodes = 1234;
  s.decode->cache_peak_bytes = s.decode->cache_budget_bytes;
  const verdict b = diagnose(s, 16);
  CHECK(has(b.suggestion, "hdf5_options::decode_cache_bytes (budget 64 MiB, 1234 decodes"));

  // Amplification near 1 (each chunk decoded once): the usual decode advice.
  s.decode->decoded_bytes = s.bytes;
  const verdict once = diagnose(s, 16);
  CHECK(!has(once.summary, "inflated"));
  CHECK(has(once.suggestion, "raise workers"));

  // Nothing decompressed (uncompressed shards): said so, not "decompression".
  s.decode = decode_stats{};
  CHECK(has(diagnose(s, 16).summary, "No chunk was decompressed"));
  CHECK(diagnose(s, 16).stage == bottleneck::read);
}

TEST_CASE("storage-bound random reads: the record size and the locality-aware order") {
  loader_stats s = recorded(14, 0.95, 0.2, 0.9);  // 80 % of each read waiting for I/O
  s.order = "shuffled";
  const verdict v = diagnose(s, 16);
  MESSAGE(v.report());
  CHECK(v.stage == bottleneck::storage);
  CHECK(has(v.summary, "random reads of 16 KiB"));
  CHECK(has(v.suggestion, "sample_order::block_shuffled"));
  s.order = "sequential";
  const verdict seq = diagnose(s, 16);
  CHECK(seq.stage == bottleneck::storage);
  CHECK(!has(seq.summary, "random reads"));
  CHECK(has(seq.suggestion, "page cache"));
}

TEST_CASE("wording: one worker, shares never above 100 %, copy time summed over streams") {
  // Wording once wrong: "(1 workers)", "use fewer workers" with one worker, "103.0 % on a CPU" beside
  // "waited 100.0 % for a free core", "copy engine ran 104 % of the time".
  loader_stats s = recorded(1, 0.95, 1.03, 0.9);
  s.workers[0].runqueue_seconds = s.workers[0].read_seconds;  // schedstat: the whole thread
  const verdict v = diagnose(s, 1);
  MESSAGE(v.report());
  const std::string text = v.report();
  CHECK(has(text, "(1 worker)"));
  CHECK(!has(text, "1 workers"));
  CHECK(!has(text, "fewer workers"));
  CHECK(!has(text, "workers are"));
  CHECK(has(v.summary, "the worker is busy 95 %"));
  for (double p : percentages(text)) CHECK(p <= 100.0);
  CHECK(has(text, "worker time: 50.7 % on a CPU, 49.3 % waiting for a free core, 0.0 % waiting"));

  // The good case with one worker: no "use fewer workers".
  loader_stats fast = recorded(1, 0.5, 1.0, 0.0);
  fast.consumer_wait_seconds = 0.1;
  const verdict c = diagnose(fast, 4);
  CHECK(c.stage == bottleneck::consumer);
  CHECK(!has(c.suggestion, "fewer workers"));
  CHECK(has(diagnose(recorded(3, 0.5, 1.0, 0.0), 4).suggestion, "1 worker") == false);

  // Copies timed on two streams add up past the wall time: stated, and the summary says busy
  // all the time instead of "ran 104 % of the time".
  loader_stats h = recorded(8, 0.5, 1.0, 0.9);
  h.streams = 2;
  h.transfer.copies = h.transfer.timed_copies = 1000;
  h.transfer.bytes = h.bytes;
  h.transfer.copy_seconds = 10.4;
  const verdict hv = diagnose(h, 16);
  MESSAGE(hv.report());
  CHECK(hv.stage == bottleneck::h2d);
  CHECK(has(hv.summary, "busy all the time"));
  for (double p : percentages(hv.summary)) CHECK(p <= 100.0);
  CHECK(has(hv.report(), "summed over 2 streams is 104 % of wall time"));
}

TEST_CASE("decode or pipeline: stats either side of the old 75 % line give one verdict") {
  // The same uncompressed data, two runs: workers 74 % and 77 % busy, the planner blocked on
  // slots most of the time (its slots held batches the workers had not finished). The old rule
  // (busy > 75 %) said pipeline, then decode.
  for (double busy : {0.62, 0.74, 0.77, 0.84, 0.90}) {
    CAPTURE(busy);
    CHECK(diagnose(recorded(14, busy, 0.95, 0.8), 16).stage == bottleneck::decode);
  }
  // Workers idle while the planner was free: the pipeline's shape, on both sides of 75 %.
  for (double busy : {0.50, 0.62, 0.74, 0.77, 0.84}) {
    CAPTURE(busy);
    CHECK(diagnose(recorded(14, busy, 0.95, 0.1), 16).stage == bottleneck::pipeline);
  }
}

TEST_CASE("idle time before the consumer's first request does not count") {
  test::memory_source src(4096, 256);
  loader_config c;
  c.batch_size = 16;
  c.part = partition{};
  c.workers = 2;
  c.prefetch = 2;
  c.order = sample_order::sequential;
  loader<test::memory_source> l(src, c);
  // The workers fill the prefetch window in microseconds, then wait 0.5 s for the consumer.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int k = 0; k < 4; ++k) REQUIRE(l.next());
  double idle = 0;
  for (const auto& w : l.stats().workers) idle += w.idle_seconds;
  CHECK(idle < 0.4);  // was >= 2 x 0.5 s
}

TEST_CASE("CPU-bound with nothing decompressed: never advises storing the data uncompressed") {
  loader_stats s = recorded(16, 0.97, 0.95, 0.9);
  s.decode = decode_stats{};  // a source that decodes, but read only uncompressed records
  const verdict v = diagnose(s, 16);
  CHECK(v.stage == bottleneck::read);
  CHECK(!has(v.suggestion, "uncompressed"));
  CHECK(has(v.suggestion, "nothing was decompressed"));
  s.decode.reset();  // no decode_stats: the CPU-work verdict, still without that advice
  CHECK(diagnose(s, 16).stage == bottleneck::decode);
  CHECK(!has(diagnose(s, 16).suggestion, "uncompressed"));
}

TEST_CASE("uncompressed run, workers saturated: the stage is read, never decode") {
  // The figures of a run on uncompressed HDF5 shards from the page cache: one worker busy 97 %
  // of the time, two thirds of it waiting for a free core, no chunk decoded.
  loader_stats s = recorded(1, 0.97, 0.34, 0.9);
  s.workers[0].runqueue_seconds = s.workers[0].read_seconds * 0.66;
  s.order = "sequential";
  decode_stats d;
  d.delivered_bytes = s.bytes;
  d.records = s.records;
  d.cache_budget_bytes = 64u << 20;
  s.decode = d;
  const verdict v = diagnose(s, 2);
  MESSAGE(v.report());
  CHECK(v.stage == bottleneck::read);
  CHECK(std::string(to_string(v.stage)) == "read");
  CHECK(has(v.report(), "bottleneck: read\n"));
  CHECK(has(v.summary, "Reading records bounds throughput: the worker is busy 97 %"));
  CHECK(has(v.summary, "No chunk was decompressed"));
  CHECK(!has(v.summary, "decompression"));
  CHECK(!has(v.report(), "decoded 0 chunks"));
  CHECK(has(v.suggestion, "the worker waits for a core"));
  CHECK(!has(v.suggestion, "uncompressed"));
  CHECK(!has(v.suggestion, "repack"));

  // The same run once a chunk is decoded: decode, as before.
  s.decode->chunks_decoded = 1;
  s.decode->decoded_bytes = s.bytes;
  CHECK(diagnose(s, 2).stage == bottleneck::decode);
}

TEST_CASE("repack advice names a chunk size of a few records, not the pack default") {
  loader_stats s = recorded(14, 0.97, 0.95, 0.9);
  s.order = "block_shuffled";
  decode_stats d;
  d.chunks_decoded = 1000;
  d.decoded_bytes = s.bytes * 64;
  d.delivered_bytes = s.bytes;
  d.records = s.records;
  d.cache_budget_bytes = 64u << 20;
  s.decode = d;
  const verdict v = diagnose(s, 16);
  CHECK(has(v.suggestion, "--chunk-size 64KiB"));  // 4 records of 16 KiB
  CHECK(has(v.suggestion, "~64 records each"));
}

TEST_CASE("saturated workers on small records: the per-record cost, never the consumer") {
  // 256-byte records, workers busy 99 % on a CPU, the consumer waited 5 %: once reported as
  // "the consumer bounds throughput ... nothing to fix in loading".
  loader_stats s = recorded(14, 0.99, 1.0, 0.9);
  s.records = 52'000'000;
  s.bytes = s.records * 256;
  s.consumer_wait_seconds = 0.5;
  s.order = "shuffled";
  s.decode = decode_stats{};  // an HDF5 source that decoded nothing: uncompressed records
  const verdict v = diagnose(s, 16);
  MESSAGE(v.report());
  CHECK(v.stage == bottleneck::read);
  CHECK(has(v.summary, "Each record costs a worker 2.67 us for 256 bytes"));
  CHECK(has(v.summary, "only just keep up"));
  CHECK(has(v.suggestion, "pack small records together"));
  CHECK(has(v.suggestion, "block_shuffled"));  // the recorded order is shuffled
  CHECK(has(v.report(), "worker time per record: 2.67 us (375180 records/s per worker)"));
  CHECK(!has(v.suggestion, "nothing to fix"));

  // The same without decode_stats (LMDB): the decode stage's words, the same per-record advice.
  s.decode.reset();
  const verdict l = diagnose(s, 14);
  CHECK(l.stage == bottleneck::decode);
  CHECK(has(l.summary, "Each record costs a worker"));
  CHECK(has(l.suggestion, "pack small records together"));

  // 16 KiB records moving 2.2 GB/s per worker: bytes, not a per-record cost, bound the rate.
  loader_stats big = recorded(4, 0.95, 1.0, 0.9);
  big.records = 5'120'000;
  big.bytes = big.records * 16384;
  big.decode = decode_stats{};
  const verdict b = diagnose(big, 4);
  CHECK(b.stage == bottleneck::read);
  CHECK(!has(b.summary, "Each record costs"));

  // Saturated workers with the consumer waiting 5 % and large records: still their stage.
  big.consumer_wait_seconds = 0.5;
  CHECK(diagnose(big, 4).stage != bottleneck::consumer);
}

TEST_CASE("decoding on the GPU: its kernels busy name gpu_decode; busy workers name their reads") {
  loader_stats s = recorded(4, 0.5, 0.9, 0.0);
  s.device_decode.on = true;
  s.device_decode.device.batches = 1000;
  s.device_decode.device.timed_batches = 100;
  s.device_decode.device.decode_seconds = 0.95;  // 9.5 ms a batch: 95 % of the 10 s run
  s.device_decode.device.units = 64000;
  s.device_decode.device.compressed_bytes = s.bytes / 2;
  s.device_decode.device.gathered_bytes = s.bytes;
  verdict v = diagnose(s, 16);
  CHECK(v.stage == bottleneck::gpu_decode);
  CHECK(v.summary.find("95 %") != std::string::npos);
  const std::string all = v.report();
  CHECK(all.find("(0.50 x the records' bytes)") != std::string::npos);
  CHECK(all.find("busy 95.0 %") != std::string::npos);

  s.device_decode.device.decode_seconds = 0.2;  // the GPU idles; the workers are saturated
  s = [&] {
    loader_stats busy = recorded(4, 0.97, 0.9, 0.0);
    busy.device_decode = s.device_decode;
    return busy;
  }();
  v = diagnose(s, 16);
  CHECK(v.stage == bottleneck::read);
  CHECK(v.summary.find("compressed bytes for the GPU") != std::string::npos);
  CHECK(v.suggestion.find("raise workers") != std::string::npos);
}

TEST_CASE("remote I/O: workers waiting on HTTP requests are named, with the requests' figures") {
  loader_stats s = recorded(14, 0.95, 0.1, 0.9);  // busy workers, most of each read waiting
  s.order = "shuffled";
  remote_stats r;
  r.remote = true;
  r.requests = 512'000;
  r.bytes_fetched = s.bytes;
  r.bytes_delivered = s.bytes;
  r.latency_us[14] = 500'000;  // [16, 32) ms
  r.latency_us[17] = 12'000;   // [131, 262) ms
  r.read_wait_seconds = 0.8 * s.read_seconds();
  s.remote = r;
  const verdict v = diagnose(s, 16);
  MESSAGE(v.report());
  CHECK(v.stage == bottleneck::remote);
  CHECK(std::string(to_string(v.stage)) == "remote");
  CHECK(has(v.summary, "waiting on HTTP requests"));
  CHECK(has(v.summary, "80 %"));
  CHECK(has(v.summary, "p50 32.8 ms"));
  CHECK(has(v.summary, "p99 262.1 ms"));
  CHECK(has(v.suggestion, "sample_order::block_shuffled"));
  CHECK(has(v.suggestion, "raise workers"));
  CHECK(has(v.suggestion, "node-local disk"));
  CHECK(has(v.report(), "remote: 512000 requests"));
  CHECK(!has(v.report(), "units fetched"));  // a request per record: no unit counts to show
  for (const double p : percentages(v.report())) CHECK(p <= 100.0);

  // In block_shuffled already: the order is not advised again; the units fetched show, and
  // how many the read-ahead fetched before a read asked.
  s.order = "block_shuffled";
  s.remote->unit_fetches = 115;
  s.remote->unit_prefetches = 100;
  s.remote->unit_hits = 90'000;
  const verdict b = diagnose(s, 16);
  CHECK(b.stage == bottleneck::remote);
  CHECK(!has(b.suggestion, "block_shuffled"));
  CHECK(has(b.report(), "115 units fetched, 100 of them ahead of their reads, 90000 reads from a "
                        "unit held"));

  // Requests that are a small part of the reads: storage or CPU stages as before.
  s.remote->read_wait_seconds = 0.1 * s.read_seconds();
  CHECK(diagnose(s, 16).stage == bottleneck::storage);
  // Waits that are the workers' time runnable but without a core (an oversubscribed machine,
  // as with four decoding workers, their fetch threads and the server on two cores): the cores
  // are named, not the store.
  s.remote->read_wait_seconds = 0.54 * s.read_seconds();
  for (auto& w : s.workers) {
    w.read_cpu_seconds = 0.34 * w.read_seconds;
    w.runqueue_seconds = 0.47 * w.read_seconds;
  }
  const verdict starved = diagnose(s, 16);
  MESSAGE(starved.report());
  CHECK(starved.stage != bottleneck::remote);
  CHECK(has(starved.suggestion, "fewer free cores than runnable threads"));
  CHECK(has(starved.report(), "remote: 512000 requests"));  // still reported as evidence
  for (auto& w : s.workers) w.runqueue_seconds = 0.02 * w.read_seconds;
  CHECK(diagnose(s, 16).stage == bottleneck::remote);  // the same waits with free cores
  // A local source (no remote block): never named.
  for (auto& w : s.workers) {
    w.read_cpu_seconds = 0.1 * w.read_seconds;
    w.runqueue_seconds = 0;
  }
  s.remote->read_wait_seconds = 0.1 * s.read_seconds();
  s.remote.reset();
  CHECK(diagnose(s, 16).stage == bottleneck::storage);
  CHECK(!has(diagnose(s, 16).report(), "remote:"));
}
