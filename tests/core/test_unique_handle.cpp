// detail::unique_handle: each handle is closed exactly once, by the owner that holds it last;
// null values are never closed; a stateful closer moves with its value.
#include <doctest/doctest.h>

#include <utility>
#include <vector>

#include "gpufeed/detail/unique_handle.hpp"

namespace {

std::vector<int> closed;

struct record_close {
  void operator()(int h) const noexcept { closed.push_back(h); }
};
using h = gpufeed::detail::unique_handle<int, record_close>;

struct minus_one_close {
  static constexpr int null = -1;
  int tag = 0;  // state: which "library function" closes this handle
  void operator()(int v) const noexcept { closed.push_back(tag * 100 + v); }
};
using hm = gpufeed::detail::unique_handle<int, minus_one_close>;

}  // namespace

TEST_CASE("a handle is closed once, by its last owner") {
  closed.clear();
  {
    h a(7);
    h b(std::move(a));
    CHECK_FALSE(a.valid());
    CHECK(b.get() == 7);
    CHECK(closed.empty());
  }
  CHECK(closed == std::vector<int>{7});
}

TEST_CASE("move assignment swaps: the source's destructor releases the old handle") {
  closed.clear();
  h a(1);
  {
    h b(2);
    a = std::move(b);
    CHECK(a.get() == 2);
    CHECK(b.get() == 1);
    CHECK(closed.empty());
  }
  CHECK(closed == std::vector<int>{1});
  a.reset();
  CHECK(closed == std::vector<int>{1, 2});
  a.reset();
  CHECK(closed.size() == 2);
}

TEST_CASE("null is never closed; out() releases before a C API writes a new value") {
  closed.clear();
  { h a; }
  CHECK(closed.empty());
  h a(3);
  *a.out() = 4;
  CHECK(closed == std::vector<int>{3});
  CHECK(a.release() == 4);
  CHECK_FALSE(a.valid());
  CHECK(closed.size() == 1);
}

TEST_CASE("a closer's own null and state move with the value") {
  closed.clear();
  {
    hm zero(0, minus_one_close{5});  // 0 is a real handle when null is -1
    hm none;
    CHECK(zero.valid());
    CHECK_FALSE(none.valid());
    none = std::move(zero);
  }
  CHECK(closed == std::vector<int>{500});
}
