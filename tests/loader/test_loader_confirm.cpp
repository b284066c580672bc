// The loader confirms a confirming_reader's reads after each task (detail/loader/read_confirm.hpp;
// hdf5_source's readers of memory-mapped shards are such readers): the reader is switched to
// confirming per task, and a record whose read does not stand becomes that record's failure for
// the error policy — never delivered — with or without a per-record transform, in every order.
// A record whose read already failed fails once. Under the default policy the batch's error
// names the record.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/loader.hpp"
#include "gpufeed/record_transform.hpp"
#include "memory_source.hpp"

using namespace gpufeed;

namespace {

// memory_source whose reader's reads of the records in `unstable` read (wrong) zeros and do not
// stand: confirm_reads() says so, confirm(i) throws io_error for them. Reads of the records in
// `broken` throw as they read.
class confirming_source : public test::memory_source {
 public:
  confirming_source(std::uint64_t n, std::size_t fixed) : memory_source(n, fixed) {}

  class reader {
   public:
    void read(std::uint64_t i, std::span<std::byte> dst) {
      if (s_->broken.count(i))
        throw io_error("broken read", error_context{.file = "memory://c", .record = i});
      s_->read(i, dst);
      if (s_->unstable.count(i)) {
        std::fill(dst.begin(), dst.end(), std::byte{0});
        shaky_ = true;
      }
      if (each_) s_->confirmed_each.fetch_add(1);
    }
    void confirm_later() noexcept { each_ = false; }
    bool confirm_reads() noexcept {
      s_->confirms.fetch_add(1);
      const bool ok = !shaky_;
      shaky_ = false;
      return ok;
    }
    void confirm(std::uint64_t i) const {
      if (s_->unstable.count(i))
        throw io_error("read does not stand", error_context{.file = "memory://c", .record = i});
    }
    const confirming_source* s_;
    bool each_ = true, shaky_ = false;
  };
  reader make_reader() const { return reader{this}; }

  std::set<std::uint64_t> unstable, broken;
  mutable std::atomic<std::uint64_t> confirms{0}, confirmed_each{0};
};

static_assert(confirming_reader<confirming_source::reader>);

}  // namespace

TEST_CASE("reads that do not stand fail their records, once, in every order") {
  for (const bool transform : {false, true})
    for (const auto order : {sample_order::sequential, sample_order::shuffled,
                             sample_order::block_shuffled}) {
      CAPTURE(transform);
      CAPTURE(static_cast<int>(order));
      confirming_source src(3000, 64);
      src.unstable = {0, 17, 18, 1999, 2999};
      src.broken = {18, 500};  // 18: both; it fails once
      loader_config c;
      c.batch_size = 100;
      c.order = order;
      c.workers = 3;
      c.epochs = 2;
      c.on_error = error_policy::skip;
      if (transform)  // a copy: its input may be the zeros of a read that does not stand
        c.per_record = record_transform::fixed(
            64, [](const record_input& in, std::span<std::byte> out, record_rng&) {
              std::copy(in.bytes.begin(), in.bytes.end(), out.begin());
            });
      loader<confirming_source> l(src, c);
      std::vector<std::uint64_t> seen;
      std::size_t wrong = 0;
      while (auto b = l.next())
        for (std::size_t k = 0; k < b->size(); ++k) {
          const auto i = b->indices()[k];
          seen.push_back(i);
          wrong += !src.matches(i, b->record(k));
        }
      CHECK(wrong == 0);
      std::set<std::uint64_t> bad = src.unstable;
      bad.insert(src.broken.begin(), src.broken.end());
      std::vector<std::uint64_t> want;
      for (int e = 0; e < 2; ++e)
        for (std::uint64_t i = 0; i < src.size(); ++i)
          if (!bad.count(i)) want.push_back(i);
      std::sort(seen.begin(), seen.end());
      std::sort(want.begin(), want.end());
      CHECK(seen == want);
      const auto st = l.stats();
      CHECK(st.skipped == 2 * bad.size());
      std::multiset<std::uint64_t> skipped;
      for (const auto& sk : st.skipped_log) skipped.insert(sk.index);
      for (const auto i : bad) CHECK(skipped.count(i) == 2);
      CHECK(src.confirms.load() >= st.batches);  // after every task
      CHECK(src.confirmed_each.load() == 0);     // the workers confirm per task, not per read
    }
}

TEST_CASE("a read that does not stand fails its batch under the default policy, naming it") {
  confirming_source src(400, 32);
  src.unstable = {123};
  loader_config c;
  c.batch_size = 50;
  c.order = sample_order::sequential;
  c.workers = 2;
  c.epochs = 1;
  loader<confirming_source> l(src, c);
  bool threw = false;
  try {
    while (auto b = l.next())
      for (std::size_t k = 0; k < b->size(); ++k) CHECK(b->indices()[k] != 123);
  } catch (const io_error& e) {
    threw = true;
    CHECK(e.record() == 123);
    CHECK(e.message().find("does not stand") != std::string::npos);
  }
  CHECK(threw);
}
