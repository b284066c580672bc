// Shared by the remote tests: an http_file's reads through the seam's public calls, and options
// whose timeouts and retries fit a test on the loopback interface.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpufeed/detail/remote/http_file.hpp"

namespace gpufeed::test {

// Short waits: a loopback server answers in microseconds, so a second without a byte is a stall.
inline detail::remote::http_options quick_options() {
  detail::remote::http_options o;
  o.connect_timeout = std::chrono::milliseconds(2000);
  o.low_speed_time = std::chrono::seconds(2);
  o.request_timeout = std::chrono::milliseconds(5000);
  o.retry.max_attempts = 10;
  o.retry.base_delay = std::chrono::milliseconds(1);
  o.retry.max_delay = std::chrono::milliseconds(20);
  o.retry.max_total = std::chrono::milliseconds(20000);
  return o;
}

// n bytes of `f` at `offset`, through read_exact (errors thrown as the seam throws them).
inline std::vector<std::byte> read_at(const detail::remote::http_file& f, std::uint64_t offset,
                                      std::size_t n) {
  std::vector<std::byte> out(n);
  f.read_exact(out.data(), n, offset);
  return out;
}

}  // namespace gpufeed::test
