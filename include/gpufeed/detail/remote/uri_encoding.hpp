// gpufeed — percent-encoding as AWS Signature Version 4 asks for it (RFC 3986), and the query
// strings built from it.
//
// SigV4 signs the bytes a server will rebuild, so the encoding must be exactly the one S3 uses:
// the unreserved characters A-Z a-z 0-9 - . _ ~ stay, every other byte (UTF-8 bytes included)
// becomes %XX with upper-case hex; a space is %20, never '+'; '/' stays in a path and is %2F in
// a query. The same functions build the request's own path and query, so what is signed is what
// is sent.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpufeed::detail::remote {

// True for RFC 3986's unreserved characters, the only ones SigV4 leaves unencoded.
[[nodiscard]] constexpr bool is_unreserved(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// `s` percent-encoded byte by byte: unreserved characters kept, '/' kept when keep_slash, every
// other byte %XX (upper-case hex).
[[nodiscard]] inline std::string uri_encode(std::string_view s, bool keep_slash = false) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() + s.size() / 2);
  for (const char c : s) {
    if (is_unreserved(c) || (keep_slash && c == '/')) {
      out += c;
    } else {
      const auto b = static_cast<unsigned char>(c);
      out += '%';
      out += hex[b >> 4];
      out += hex[b & 0xF];
    }
  }
  return out;
}

// A path (an S3 key with its leading '/') encoded per segment: each segment percent-encoded, the
// '/' between them kept, nothing normalised ("a//b", "./" and ".." stay: S3 keys may hold them).
[[nodiscard]] inline std::string uri_encode_path(std::string_view path) {
  return uri_encode(path, true);
}

[[nodiscard]] constexpr int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// True when every '%' in `s` starts an escape of two hex digits.
[[nodiscard]] constexpr bool valid_escapes(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') continue;
    if (i + 2 >= s.size() || hex_value(s[i + 1]) < 0 || hex_value(s[i + 2]) < 0) return false;
    i += 2;
  }
  return true;
}

// `s` with its %XX escapes decoded; nullopt when a '%' is not followed by two hex digits. '+'
// stays '+': SigV4 and S3 read it as itself, not as a space.
[[nodiscard]] inline std::optional<std::string> uri_decode(std::string_view s) {
  if (!valid_escapes(s)) return std::nullopt;
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// One query parameter, decoded. A parameter written without '=' ("?lifecycle") has an empty
// value, which SigV4 signs as "lifecycle=".
struct query_param {
  std::string name;
  std::string value;
};

// A query string as sent (without the '?') split at '&' and at each part's first '=', names and
// values decoded; empty parts ("a&&b") are skipped. nullopt when an escape is malformed.
[[nodiscard]] inline std::optional<std::vector<query_param>> parse_query(std::string_view q) {
  std::vector<query_param> params;
  while (!q.empty()) {
    const std::size_t amp = q.find('&');
    const std::string_view part = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view{} : q.substr(amp + 1);
    if (part.empty()) continue;
    const std::size_t eq = part.find('=');
    auto name = uri_decode(part.substr(0, eq));
    auto value =
        uri_decode(eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1));
    if (!name || !value) return std::nullopt;
    params.push_back({std::move(*name), std::move(*value)});
  }
  return params;
}

// SigV4's canonical query string: each name and value encoded, the pairs sorted by encoded name
// and then by encoded value (byte order), joined as name=value with '&'. Also the query string a
// request sends, so that the two cannot differ.
[[nodiscard]] inline std::string canonical_query(const std::vector<query_param>& params) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(params.size());
  for (const auto& p : params) encoded.emplace_back(uri_encode(p.name), uri_encode(p.value));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

}  // namespace gpufeed::detail::remote
