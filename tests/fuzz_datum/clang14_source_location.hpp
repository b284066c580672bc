// Force-included (-include) into the libFuzzer build only. clang 14 lacks
// __builtin_source_location, so libstdc++ 12's <source_location> declares nothing and
// gpufeed/error.hpp cannot compile; this stand-in, built on the builtins clang 14 does have,
// fills the gap. Any compiler that has the real std::source_location skips it.
#pragma once

#include <source_location>

#if !defined(__cpp_lib_source_location) && defined(__clang__)
namespace std {
struct source_location {
  static constexpr source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           unsigned line = __builtin_LINE(),
                                           unsigned column = __builtin_COLUMN()) noexcept {
    source_location s;
    s.file_ = file;
    s.function_ = function;
    s.line_ = line;
    s.column_ = column;
    return s;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }
  constexpr unsigned line() const noexcept { return line_; }
  constexpr unsigned column() const noexcept { return column_; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  unsigned line_ = 0, column_ = 0;
};
}  // namespace std
#endif
