// The loader hands runs of adjacent records to a reader that reads them with one call
// (run_reader): in sequential and block_shuffled order most records go in runs, each record
// still arrives exactly once with its own bytes; a run that fails is read again record by
// record, so under skip only the bad record is dropped and its error names it; a reader that
// reads part of a run (its shard ends) gets the rest as the next run.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/loader.hpp"
#include "memory_source.hpp"

using namespace gpufeed;

namespace {

struct run_counts {
  std::atomic<std::uint64_t> runs{0}, run_records{0}, single{0};
};

// memory_source with a per-thread reader that reads runs; runs stop at multiples of `shard`
// records (as a shard's end does) and a run holding a failing record throws as a whole.
class run_source : public test::memory_source {
 public:
  run_source(std::uint64_t n, std::size_t fixed, std::uint64_t shard)
      : memory_source(n, fixed), shard_(shard) {}

  class reader {
   public:
    void read(std::uint64_t i, std::span<std::byte> dst) {
      ++c_->single;
      s_->read(i, dst);
    }
    std::size_t read_run(std::uint64_t first, std::span<const std::span<std::byte>> dst) {
      const std::uint64_t end = (first / s_->shard_ + 1) * s_->shard_;
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(dst.size(), end - first));
      for (std::size_t j = 0; j < n; ++j) {
        if (dst[j].size() != s_->record_size(first + j)) throw config_error("wrong size");
        s_->read(first + j, dst[j]);  // throws for a failing record: the whole run fails
      }
      ++c_->runs;
      c_->run_records += n;
      return n;
    }
    const run_source* s_;
    run_counts* c_;
  };
  reader make_reader() const { return reader{this, &counts}; }

  mutable run_counts counts;

 private:
  std::uint64_t shard_;
};

struct drained {
  std::vector<std::uint64_t> seen;
  std::size_t wrong = 0;
};

drained drain(loader<run_source>& l, const run_source& src) {
  drained d;
  while (auto b = l.next())
    for (std::size_t k = 0; k < b->size(); ++k) {
      d.seen.push_back(b->indices()[k]);
      d.wrong += !src.matches(b->indices()[k], b->record(k));
    }
  std::sort(d.seen.begin(), d.seen.end());
  return d;
}

}  // namespace

TEST_CASE("runs in sequential and block_shuffled order; every record once with its bytes") {
  for (const auto order : {sample_order::sequential, sample_order::block_shuffled,
                           sample_order::shuffled}) {
    CAPTURE(static_cast<int>(order));
    run_source src(5000, 64, 700);
    loader_config c;
    c.batch_size = 256;
    c.order = order;
    c.workers = 3;
    c.prefetch = 3;
    c.epochs = 1;
    loader<run_source> l(src, c);
    const drained d = drain(l, src);
    CHECK(d.wrong == 0);
    REQUIRE(d.seen.size() == src.size());
    for (std::uint64_t i = 0; i < src.size(); ++i) CHECK(d.seen[i] == i);
    MESSAGE("runs ", src.counts.runs.load(), ", records in runs ", src.counts.run_records.load(),
            ", single reads ", src.counts.single.load());
    CHECK(src.counts.run_records + src.counts.single == src.size());
    if (order == sample_order::sequential) {
      CHECK(src.counts.run_records >= src.size() * 9 / 10);
      CHECK(src.counts.runs < src.size() / 20);
    }
  }
}

TEST_CASE("a run that fails is read record by record: only the bad record is skipped") {
  run_source src(3000, 32, 1000);
  src.fail = [](std::uint64_t i) { return i == 1234 || i == 2001; };
  loader_config c;
  c.batch_size = 200;
  c.order = sample_order::sequential;
  c.workers = 2;
  c.epochs = 1;
  c.on_error = error_policy::skip;
  loader<run_source> l(src, c);
  const drained d = drain(l, src);
  CHECK(d.wrong == 0);
  CHECK(d.seen.size() == src.size() - 2);
  CHECK(!std::binary_search(d.seen.begin(), d.seen.end(), 1234));
  CHECK(!std::binary_search(d.seen.begin(), d.seen.end(), 2001));
  const auto st = l.stats();
  CHECK(st.skipped == 2);
  for (const auto& sk : st.skipped_log) {
    CHECK((sk.index == 1234 || sk.index == 2001));
    CHECK(sk.what.find("record " + std::to_string(sk.index)) != std::string::npos);
  }
}
