// lmdb_source::will_need: madvise(MADV_WILLNEED) over the pages of the records' values
// (observed through detail::lmdb::advise_observer): every value of the range lies inside one
// advised, page-aligned extent of data.mdb; values on overflow pages of neighbouring keys are
// merged into one extent; a value outside the range is not advised.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/lmdb_source.hpp"
#include "lmdb_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using namespace gpufeed::test;

namespace {

std::mutex advised_mutex;
std::vector<std::pair<std::uint64_t, std::uint64_t>> advised;  // [begin, end) in data.mdb

void observe(const std::string&, std::uint64_t at, std::uint64_t n) noexcept {
  std::lock_guard lock(advised_mutex);
  advised.emplace_back(at, at + n);
}

// True when `value` occurs in file bytes lying wholly inside one advised extent.
bool inside_advice(const std::string& file, const std::string& value) {
  for (const auto& [lo, hi] : advised) {
    if (hi - lo < value.size()) continue;
    if (std::string_view(file).substr(lo, hi - lo).find(value) != std::string_view::npos)
      return true;
  }
  return false;
}

}  // namespace

TEST_CASE("lmdb will_need advises the pages of the records' values") {
  temp_dir dir("lmdb-ahead");
  std::mt19937_64 rng(5);
  kv_list kv;
  std::vector<std::string> values;
  for (int i = 0; i < 60; ++i) {
    // large values (overflow pages, 3 each) and, from 40 on, small ones in leaf pages
    values.push_back(random_bytes(rng, i < 40 ? 9000 : 100));
    kv.emplace_back(key8(static_cast<std::uint64_t>(i)), values.back());
  }
  write_lmdb(dir / "s", kv);
  lmdb_source src(dir / "s");
  std::ifstream f(dir / "s" / "data.mdb", std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));

  detail::lmdb::advise_observer.store(&observe);
  src.will_need(10, 5);
  src.will_need(45, 10);
  src.will_need(58, 100);  // clipped
  src.will_need(60, 1);    // past the end: nothing
  detail::lmdb::advise_observer.store(nullptr);

  REQUIRE(!advised.empty());
  for (const auto& [lo, hi] : advised) {
    CHECK(lo % page == 0);
    CHECK(hi % page == 0);
    CHECK(hi > lo);
  }
  for (int i : {10, 11, 12, 13, 14, 45, 50, 54, 58, 59}) {
    CAPTURE(i);
    CHECK(inside_advice(file, values[static_cast<std::size_t>(i)]));
  }
  for (int i : {0, 9, 15, 30}) {  // overflow values outside the ranges
    CAPTURE(i);
    CHECK(!inside_advice(file, values[static_cast<std::size_t>(i)]));
  }
  // Records 10..14: 15 overflow pages in a row at most, merged (LMDB writes them in key order).
  CHECK(advised.size() <= 2 + 2 + 2);
}
