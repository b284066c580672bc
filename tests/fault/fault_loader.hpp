// The loader set-up both fault suites use: sequential order, one epoch, two workers, so which
// records a fault hits is known, under the policy being tested.
#pragma once

#include "gpufeed/loader.hpp"

namespace gpufeed::test {

inline loader_config fault_loader_config(error_policy policy) {
  loader_config c;
  c.batch_size = 16;
  c.order = sample_order::sequential;
  c.part = partition{};
  c.epochs = 1;
  c.workers = 2;
  c.on_error = policy;
  return c;
}

}  // namespace gpufeed::test
