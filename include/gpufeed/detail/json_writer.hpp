// gpufeed::detail — the library's one JSON writer: string literals and numbers, correct for any
// input. The doctor's report and pack's manifest both write JSON through it. The public headers
// must not depend on a JSON library, and both documents need only objects, arrays, strings and
// numbers, whose punctuation the callers write themselves; this is the part that has to be right.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpufeed::detail {

// Length of the well-formed UTF-8 sequence starting at s[i] (2..4), or 0 when the bytes there
// are not one (stray continuation byte, truncated sequence, overlong form, surrogate, or a code
// point above U+10FFFF: RFC 3629). ASCII is handled by the caller.
inline std::size_t utf8_sequence_at(std::string_view s, std::size_t i) noexcept {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (d & 0x3Fu);
  }
  if (n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
  if (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
  return n;
}

// Appends s as a JSON string literal. Quotes, backslashes and control characters are escaped
// (\b \f \n \r \t by name, the others as \u00XX); well-formed UTF-8 passes through unchanged;
// each byte that is not part of well-formed UTF-8 (file names on POSIX are bytes, not text)
// becomes \ufffd (U+FFFD), so the output always parses and a non-UTF-8 name is shown lossily.
inline void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (const std::size_t n = utf8_sequence_at(s, i)) {
        out.append(s.substr(i, n));
        i += n;
      } else {
        out += "\\ufffd";
        ++i;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 0xF];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

// s as a JSON string literal (append_json_string's rules).
inline std::string json_string(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_json_string(out, s);
  return out;
}

// Appends v as a JSON number: the shortest text that reads back as the same double. JSON has no
// NaN or infinity; those become null.
inline void append_json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace gpufeed::detail
