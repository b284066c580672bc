// gpufeed — HTTP(S) URLs of remote shards: parsed, checked, and printable without secrets.
//
// A URL can carry credentials: userinfo ("https://user:password@host/"), or a presigned query
// (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, or another service's token). Every
// message gpufeed writes names a URL through redact_url() / http_url::redacted(), never as given,
// so no log line, exception or report repeats a secret. A malformed URL is a config_error naming
// the URL (redacted) and what is wrong with it.
//
// s3:// URLs and where their objects are requested from: s3_url.hpp.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpufeed/detail/remote/uri_encoding.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::remote {

// True for a query parameter name whose value may be a secret (compared without case): AWS's
// presigned-URL parameters, other stores' signatures and tokens, anything named like a key or a
// password. Redacting a harmless value costs a message a detail; missing a secret leaks it.
[[nodiscard]] inline bool secret_parameter(std::string_view name) {
  std::string n;
  for (const char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "sig" || n == "policy" || n == "x-amz-signature" || n == "x-amz-credential" ||
      n == "x-amz-security-token")
    return true;
  for (const std::string_view part :
       {"signature", "credential", "token", "secret", "password", "passwd", "key", "auth"})
    if (n.find(part) != std::string::npos) return true;
  return false;
}

// `url` fit for a message: userinfo replaced by "***", the value of every secret-looking query
// parameter (secret_parameter) replaced by "***", the fragment dropped. Works on any text: it
// looks only at where "://", '@', '?', '&', '=' and '#' fall. `malformed`: the URL failed to
// parse, so its authority cannot be trusted to end at the first '/' (a password holding '/',
// '?' or '#' unencoded): everything up to the last '@' anywhere is hidden instead, which may
// hide an '@' of the path too, but never a password.
[[nodiscard]] inline std::string redact_url(std::string_view url, bool malformed = false) {
  if (malformed) {
    if (const std::size_t at = url.rfind('@'); at != std::string_view::npos) {
      const std::size_t se = url.find("://");
      const std::size_t begin = se != std::string_view::npos && se < at ? se + 3 : 0;
      return std::string(url.substr(0, begin)) + "***@" + redact_url(url.substr(at + 1));
    }
  }
  std::string_view front = url.substr(0, url.find('#'));
  const std::size_t q = front.find('?');
  std::string_view query = q == std::string_view::npos ? std::string_view{} : front.substr(q + 1);
  front = front.substr(0, q);
  std::string out;
  const std::size_t scheme_end = front.find("://");
  // The authority ends at the path; without a "://" (malformed) all of the front counts, so an
  // '@' anywhere in it hides what precedes it.
  const std::size_t auth_begin = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const std::size_t auth_end = scheme_end == std::string_view::npos
                                   ? front.size()
                                   : std::min(front.size(), front.find('/', auth_begin));
  const std::size_t at = front.substr(0, auth_end).rfind('@');
  if (at != std::string_view::npos && at >= auth_begin) {
    out.append(front.substr(0, auth_begin));
    out += "***";
    out.append(front.substr(at));
  } else {
    out.append(front);
  }
  if (q == std::string_view::npos) return out;
  out += '?';
  bool first = true;
  while (true) {
    const std::size_t amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    if (!first) out += '&';
    first = false;
    const std::size_t eq = part.find('=');
    const std::string_view name = part.substr(0, eq);
    const auto decoded = uri_decode(name);
    if (eq != std::string_view::npos && secret_parameter(decoded ? *decoded : std::string(name))) {
      out.append(name);
      out += "=***";
    } else {
      out.append(part);
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return out;
}

// config_error "malformed URL: <why>" naming the URL, redacted as malformed.
[[noreturn]] inline void throw_malformed_url(std::string_view url, const std::string& why) {
  throw config_error("malformed URL: " + why, file_context(redact_url(url, true)));
}

// True for an RFC 3986 scheme: a letter, then letters, digits, '+', '-' or '.'.
[[nodiscard]] inline bool scheme_token(std::string_view s) noexcept {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s.front()))) return false;
  for (const char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.')
      return false;
  return true;
}

// True for a character RFC 3986 allows in a path or query as sent: printable ASCII other than
// space and " < > \ ^ ` { | } (non-ASCII bytes and those must arrive percent-encoded).
[[nodiscard]] constexpr bool url_char(char c) noexcept {
  const auto b = static_cast<unsigned char>(c);
  if (b <= 0x20 || b >= 0x7F) return false;
  return c != '"' && c != '<' && c != '>' && c != '\\' && c != '^' && c != '`' && c != '{' &&
         c != '|' && c != '}';
}

// An http:// or https:// URL as gpufeed requests it.
struct http_url {
  bool tls = true;         // https
  std::string host;        // lower-cased name or IPv4 address; an IPv6 literal keeps its [ ]
  std::uint16_t port = 0;  // the port connected to: the one written, else 443 or 80
  bool port_written = false;
  std::string path = "/";  // as sent: percent-encoded, starts with '/'
  std::string query;       // as sent, without the '?'; empty when there is none
  // "user:password" as written, percent-encoded; never printed (redacted() hides it), kept only
  // for a reader that authenticates with it.
  std::string userinfo;

  [[nodiscard]] std::string scheme() const { return tls ? "https" : "http"; }
  [[nodiscard]] bool default_port() const noexcept { return port == (tls ? 443 : 80); }
  // host[:port] as the Host header carries it: the port only when it is not the scheme's.
  [[nodiscard]] std::string host_header() const {
    return default_port() ? host : host + ":" + std::to_string(port);
  }
  // The URL to request, without userinfo.
  [[nodiscard]] std::string request_url() const {
    return scheme() + "://" + host_header() + path + (query.empty() ? "" : "?" + query);
  }
  // The URL for messages: userinfo as "***", secret query values as "***" (redact_url).
  [[nodiscard]] std::string redacted() const {
    return redact_url(scheme() + "://" + (userinfo.empty() ? "" : "***@") + host_header() + path +
                      (query.empty() ? "" : "?" + query));
  }
};

// Parses an http:// or https:// URL (scheme and host without regard to case); config_error
// naming the URL (redacted) when it is not one: another scheme, no host, a bad port, a space,
// a non-ASCII byte or another character that must be percent-encoded, a malformed escape. The
// fragment, which is never sent, is dropped; an empty path is "/".
[[nodiscard]] inline http_url parse_http_url(std::string_view url) {
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos)
    throw_malformed_url(url, "no scheme (expected http://, https:// or s3://)");
  std::string scheme;
  for (const char c : url.substr(0, scheme_end))
    scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  http_url u;
  if (scheme == "https") {
    u.tls = true;
  } else if (scheme == "http") {
    u.tls = false;
  } else {
    // The scheme is echoed only when it is one: text before a "://" can be anything, a secret too.
    throw_malformed_url(url, scheme_token(scheme) ? "scheme '" + scheme + "' is not http or https"
                                                  : "no scheme (expected http://, https:// or "
                                                    "s3://)");
  }
  std::string_view rest = url.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find('#'));
  const std::size_t auth_end = std::min(rest.find('/'), rest.find('?'));
  std::string_view authority = rest.substr(0, auth_end);
  std::string_view tail =
      auth_end == std::string_view::npos ? std::string_view{} : rest.substr(auth_end);
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    u.userinfo = std::string(authority.substr(0, at));
    authority = authority.substr(at + 1);
  }
  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) throw_malformed_url(url, "unterminated IPv6 address");
    host = authority.substr(0, close + 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':')
      throw_malformed_url(url, "unexpected text after the IPv6 address");
    if (!after.empty()) port = after.substr(1);
    if (!after.empty() && port.empty()) throw_malformed_url(url, "empty port");
    for (const char c : host.substr(1, host.size() - 2))
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.')
        throw_malformed_url(url, "invalid IPv6 address");
  } else {
    const std::size_t colon = authority.find(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
      if (port.empty()) throw_malformed_url(url, "empty port");
    }
    for (const char c : host)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_')
        throw_malformed_url(url, "invalid character in the host name");
  }
  if (host.empty() || host == "[]") throw_malformed_url(url, "no host");
  for (const char c : host)
    u.host += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!port.empty()) {
    unsigned long p = 0;
    for (const char c : port) {
      if (c < '0' || c > '9' || port.size() > 5) throw_malformed_url(url, "invalid port");
      p = p * 10 + static_cast<unsigned long>(c - '0');
    }
    if (p == 0 || p > 65535) throw_malformed_url(url, "port out of range (1 to 65535)");
    u.port = static_cast<std::uint16_t>(p);
    u.port_written = true;
  } else {
    u.port = u.tls ? 443 : 80;
  }
  const std::size_t qm = tail.find('?');
  const std::string_view path = tail.substr(0, qm);
  const std::string_view query =
      qm == std::string_view::npos ? std::string_view{} : tail.substr(qm + 1);
  for (const std::string_view part : {path, query}) {
    for (const char c : part)
      if (!url_char(c))
        throw_malformed_url(url,
                            "a space, control character, non-ASCII byte or one of "
                            "\" < > \\ ^ ` { | } (percent-encode it)");
    if (!valid_escapes(part)) throw_malformed_url(url, "'%' not followed by two hex digits");
  }
  u.path = path.empty() ? "/" : std::string(path);
  u.query = std::string(query);
  return u;
}

}  // namespace gpufeed::detail::remote
