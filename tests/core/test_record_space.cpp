// detail::record_space alone, with no source format: the record numbering over shards (empty
// shards included), the split of a record range over the shards it spans, file_of() never
// opening a shard, and the lazy open's contract (an open error goes to every caller until an
// open succeeds; then the shard is opened once).
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/detail/record_space/open_kind.hpp"
#include "gpufeed/detail/record_space/shard_offsets.hpp"
#include "gpufeed/detail/record_space/shard_space.hpp"
#include "gpufeed/error.hpp"

namespace rs = gpufeed::detail::record_space;

namespace {

rs::shard_offsets offsets_of(const std::vector<std::uint64_t>& records) {
  rs::shard_offsets o;
  for (const auto n : records) o.add_shard(n);
  return o;
}

struct opened_shard {
  std::string name;
};
struct extent {
  std::uint64_t records = 0;
};
using space = rs::shard_space<opened_shard, extent>;

std::unique_ptr<space> space_of(const std::vector<std::uint64_t>& records) {
  std::vector<std::filesystem::path> paths;
  for (std::size_t k = 0; k < records.size(); ++k) paths.emplace_back("shard-" + std::to_string(k));
  auto s = std::make_unique<space>(paths, 0, [](const opened_shard&) {},
                                   [](const opened_shard&) noexcept {});
  for (std::size_t k = 0; k < records.size(); ++k) s->at(k).expected.records = records[k];
  s->number_records();
  return s;
}

}  // namespace

TEST_CASE("locate: shard boundaries, and empty shards never hold a record") {
  const auto o = offsets_of({3, 0, 2, 0, 0, 4});
  CHECK(o.size() == 9);
  CHECK(o.shard_count() == 6);
  CHECK(o.first(6) == 9);
  CHECK(o.records(1) == 0);
  const std::vector<std::pair<std::uint64_t, rs::shard_place>> want = {
      {0, {0, 0}}, {2, {0, 2}}, {3, {2, 0}}, {4, {2, 1}}, {5, {5, 0}}, {8, {5, 3}}};
  for (const auto& [i, p] : want) {
    CAPTURE(i);
    CHECK(o.locate(i).shard == p.shard);
    CHECK(o.locate(i).local == p.local);
  }
  const auto lead = offsets_of({0, 0, 2});  // empty shards first
  CHECK(lead.locate(0).shard == 2);
  CHECK(lead.locate(1).local == 1);
  const auto one = offsets_of({5});
  CHECK(one.locate(4).shard == 0);
  CHECK(one.locate(4).local == 4);
}

TEST_CASE("for_each_shard_part covers every record of a range once, in order") {
  for (const auto& shards : std::vector<std::vector<std::uint64_t>>{
           {3, 0, 2, 0, 0, 4}, {0, 1, 1, 0}, {7}, {2, 2, 2}}) {
    const auto o = offsets_of(shards);
    for (std::uint64_t first = 0; first <= o.size() + 1; ++first) {
      for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{2},
                                  std::uint64_t{5}, o.size(), ~std::uint64_t{0}}) {
        CAPTURE(first);
        CAPTURE(count);
        std::vector<std::uint64_t> seen;
        std::size_t last_shard = 0;
        bool ordered = true;
        o.for_each_shard_part(first, count, [&](std::size_t k, std::uint64_t lo, std::uint64_t hi) {
          ordered = ordered && (seen.empty() || k > last_shard) && lo <= hi &&
                    hi <= o.records(k);
          last_shard = k;
          for (std::uint64_t r = lo; r < hi; ++r) seen.push_back(o.first(k) + r);
        });
        CHECK(ordered);
        std::vector<std::uint64_t> want;
        const std::uint64_t end = o.size() - std::min(first, o.size()) < count ? o.size()
                                                                              : first + count;
        for (std::uint64_t r = first; r < end; ++r) want.push_back(r);
        CHECK(seen == want);
      }
    }
  }
}

TEST_CASE("file_of names a record's shard without opening it") {
  const auto s = space_of({3, 0, 2});
  CHECK(s->size() == 5);
  CHECK(s->file_of(0) == "shard-0");
  CHECK(s->file_of(2) == "shard-0");
  CHECK(s->file_of(3) == "shard-2");
  CHECK(s->file_of(4) == "shard-2");
  CHECK(s->opens() == 0);
  for (std::size_t k = 0; k < s->shard_count(); ++k) CHECK_FALSE(s->is_open(k));
}

TEST_CASE("a failed open is thrown to every caller until an open succeeds, then opens once") {
  const auto s = space_of({2, 2});
  std::atomic<bool> broken{true};
  std::atomic<int> tries{0};
  auto open = [&] {
    ++tries;
    if (broken) throw gpufeed::io_error("cannot open", gpufeed::file_context("shard-1"));
    return std::make_unique<opened_shard>(opened_shard{"shard-1"});
  };
  int checks = 0;
  auto check = [&](opened_shard&) { ++checks; };
  for (int call = 1; call <= 3; ++call) {
    CHECK_THROWS_AS((void)s->open(1, open, check), gpufeed::io_error);
    CHECK(tries == call);  // each caller tries again
    CHECK_FALSE(s->is_open(1));
  }
  // A check that throws leaves the shard unopened as well.
  broken = false;
  CHECK_THROWS_AS((void)s->open(1, open, [](opened_shard&) { throw std::runtime_error("no"); }),
                  std::runtime_error);
  CHECK_FALSE(s->is_open(1));
  CHECK(s->opens() == 0);
  tries = 0;
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] { right += s->open(1, open, check).name == "shard-1"; });
  for (auto& t : threads) t.join();
  CHECK(right == 4);
  CHECK(tries == 1);
  CHECK(checks == 1);
  CHECK(s->opens() == 1);
  CHECK(s->is_open(1));
  CHECK_FALSE(s->is_open(0));
  CHECK(s->if_open(1)->name == "shard-1");
}

TEST_CASE("open_kind_of maps a source option's eager and lazy") {
  enum class option { lazy, eager };
  CHECK(rs::open_kind_of(option::eager) == rs::open_kind::eager);
  CHECK(rs::open_kind_of(option::lazy) == rs::open_kind::lazy);
}
