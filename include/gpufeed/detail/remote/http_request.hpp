// gpufeed — an HTTP request as the hook that authorises it sees it, and the options of a remote
// object's reads.
//
// Signing is a hook rather than built in: a store's scheme (AWS Signature V4 for S3, a bearer
// token, none for a public server) is chosen by who opens the object, and the transport only has
// to call it with every request it is about to send, retries included (a signature carries its
// time, so a retry is signed anew).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "gpufeed/detail/remote/retry.hpp"

namespace gpufeed::detail::remote {

struct http_header {
  std::string name;
  std::string value;
};

// One request about to be sent. The transport fills method, url (the whole URL, query included:
// what the server receives) and the headers it sends itself (Range, If-Match or
// If-Unmodified-Since); a signer appends what authorises the request and may read all of it (and
// rewrite url, for a signature carried in the query).
// libcurl adds Host (from the URL) unless a header names it; no body is ever sent.
struct http_request {
  std::string method;
  std::string url;
  std::vector<http_header> headers;
};

// Called for every request on the thread that sends it, from many threads at once: it must be
// thread-safe. An exception it throws fails that request for good (not tried again), with its
// what() in the error (which must then carry no secret).
using request_signer = std::function<void(http_request&)>;

struct http_options {
  // Connecting (TCP and TLS) may take this long.
  std::chrono::milliseconds connect_timeout{10000};
  // A transfer that moves fewer than low_speed_bytes a second for low_speed_time fails (and is
  // tried again): what ends a stalled server's request without bounding a large one's time.
  long low_speed_bytes = 1;
  std::chrono::seconds low_speed_time{30};
  // A bound on one request's whole time; zero: none.
  std::chrono::milliseconds request_timeout{0};
  retry_policy retry;
  // Authorises each request; empty: requests are sent as they are.
  request_signer signer;
  // Check the server's TLS certificate and name (off only for a test server).
  bool verify_tls = true;
  // A file of CA certificates (PEM) to check it against instead of the system's; "": the system's.
  std::string ca_file;
};

}  // namespace gpufeed::detail::remote
