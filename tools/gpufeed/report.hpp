// The gpufeed CLI's failure report for pack and inspect: exactly one line on stderr, then exit
// code 1 (through CLI::RuntimeError, which main() turns into the exit code without printing).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "gpufeed/error.hpp"

namespace gpufeed::cli {

// Control characters (a newline in a file name) would break the one-line promise: escaped.
inline std::string one_line(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20)
      out += '?';
    else
      out += c;
  }
  return out;
}

// Prints "gpufeed <command>: error: ..." for the exception in flight and throws
// CLI::RuntimeError(1). A message that starts with `drop_prefix` loses it (pack passes "pack: ",
// which the library's own pack messages start with: "pack: error: pack: ..." would repeat it).
// Call from a catch block.
[[noreturn]] inline void fail_current(const char* command, std::string_view drop_prefix = {}) {
  std::string text;
  try {
    throw;
  } catch (const gpufeed::error& e) {
    text = e.describe();
  } catch (const std::exception& e) {
    text = e.what();
  }
  if (text.starts_with(drop_prefix)) text.erase(0, drop_prefix.size());
  std::fflush(stdout);
  std::fprintf(stderr, "gpufeed %s: error: %s\n", command, one_line(text).c_str());
  throw CLI::RuntimeError(1);
}

}  // namespace gpufeed::cli
