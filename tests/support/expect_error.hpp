// Checks that an operation fails with one error type, for tests that then look at the message.
#pragma once

#include <doctest/doctest.h>

#include <exception>
#include <string>

namespace gpufeed::test {

// The what() of the Error that f() throws; a doctest failure (and "") when it throws another type
// or nothing.
template <class Error, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    const std::string m = std::string("wrong exception type: ") + e.what();
    FAIL_CHECK(m);
    return {};
  }
  FAIL_CHECK("no exception thrown");
  return {};
}

inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace gpufeed::test
