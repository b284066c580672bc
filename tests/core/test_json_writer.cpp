// The library's one JSON writer (detail/json_writer.hpp): the exact text it writes for quotes,
// backslashes, control characters, UTF-8 and bytes that are not UTF-8, and its numbers. The
// doctor's report and pack's manifest both write through it.
#include <doctest/doctest.h>

#include <limits>
#include <string>

#include "gpufeed/detail/json_writer.hpp"
#include "gpufeed/pack/detail/manifest.hpp"

using gpufeed::detail::append_json_number;
using gpufeed::detail::append_json_string;
using gpufeed::detail::json_string;

namespace {

std::string number(double v) {
  std::string out;
  append_json_number(out, v);
  return out;
}

}  // namespace

TEST_CASE("JSON writer: plain text is quoted unchanged; quotes and backslashes are escaped") {
  CHECK(json_string("") == "\"\"");
  CHECK(json_string("train-00001.h5") == "\"train-00001.h5\"");
  CHECK(json_string("say \"hi\"") == "\"say \\\"hi\\\"\"");
  CHECK(json_string("C:\\path\\to") == "\"C:\\\\path\\\\to\"");
  CHECK(json_string("/ and ' and \x7f") == "\"/ and ' and \x7f\"");  // no escape needed
}

TEST_CASE("JSON writer: every control character is escaped, NUL included") {
  CHECK(json_string("a\nb\tc\rd\be\ff") == "\"a\\nb\\tc\\rd\\be\\ff\"");
  CHECK(json_string(std::string("nul\0in", 6)) == "\"nul\\u0000in\"");
  CHECK(json_string("\x01\x1f") == "\"\\u0001\\u001f\"");
  for (int c = 0; c < 0x20; ++c) {
    const std::string out = json_string(std::string(1, static_cast<char>(c)));
    INFO("control character ", c);
    CHECK(out.size() > 3);  // escaped, never raw
    CHECK(out.find(static_cast<char>(c)) == std::string::npos);
  }
}

TEST_CASE("JSON writer: well-formed UTF-8 passes through raw, other bytes become \\ufffd") {
  const std::string utf8 = "caf\xC3\xA9 \xE2\x86\x92 \xF0\x9F\x9A\x80 \xE4\xB8\xAD";  // café → 🚀 中
  CHECK(json_string(utf8) == "\"" + utf8 + "\"");
  CHECK(json_string("\xF4\x8F\xBF\xBF") == "\"\xF4\x8F\xBF\xBF\"");  // U+10FFFF, the last one
  CHECK(json_string("a\xFF" "b") == "\"a\\ufffdb\"");                 // never valid
  CHECK(json_string("\x80") == "\"\\ufffd\"");                        // stray continuation
  CHECK(json_string("\xC3") == "\"\\ufffd\"");                        // truncated at end
  CHECK(json_string("\xC3(") == "\"\\ufffd(\"");                      // bad continuation
  CHECK(json_string("\xC0\xAF") == "\"\\ufffd\\ufffd\"");             // overlong '/'
  CHECK(json_string("\xE0\x80\xAF") == "\"\\ufffd\\ufffd\\ufffd\"");  // overlong 3-byte
  CHECK(json_string("\xED\xA0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // surrogate D800
  CHECK(json_string("\xF4\x90\x80\x80") ==
        "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // above U+10FFFF
}

TEST_CASE("JSON writer: append_json_string appends, json_string returns the same text") {
  std::string out = "[";
  append_json_string(out, "a\"b");
  out += ", ";
  append_json_string(out, "\xC3\xA9\n");
  out += "]";
  CHECK(out == "[\"a\\\"b\", \"\xC3\xA9\\n\"]");
}

TEST_CASE("JSON writer: numbers are the shortest round-trip text; NaN and infinities are null") {
  CHECK(number(0) == "0");
  CHECK(number(42) == "42");
  CHECK(number(-1.5) == "-1.5");
  CHECK(number(0.1) == "0.1");
  CHECK(number(1e300) == "1e+300");
  CHECK(number(std::numeric_limits<double>::quiet_NaN()) == "null");
  CHECK(number(std::numeric_limits<double>::infinity()) == "null");
  CHECK(number(-std::numeric_limits<double>::infinity()) == "null");
}

TEST_CASE("JSON writer: pack's manifest writes its strings through the same writer") {
  // The rules above: "\n" by name, a byte that is not UTF-8 as \ufffd.
  CHECK(gpufeed::detail::pack::json_string("x\n\"\xFF") == "\"x\\n\\\"\\ufffd\"");
}
