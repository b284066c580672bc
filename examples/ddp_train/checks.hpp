// ddp_train --check: what CI asserts about a data-parallel run. Each function is a collective
// (every rank calls it; every rank gets the same verdict, computed from the same gathered data)
// and returns false, with the reason in *report, when the check fails.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "comm.hpp"

namespace ddp {

// One epoch: every rank ran the same number of batches, and the records the ranks delivered
// (`indices`, this rank's, plus `earlier`: records delivered this epoch before a resume) cover
// [0, records). `exact`: and none twice (the epoch's sequence splits evenly over the ranks).
bool check_epoch(comm& c, std::uint64_t epoch, std::uint64_t records, std::uint64_t batches,
                 std::span<const std::uint64_t> indices, std::span<const std::uint64_t> earlier,
                 bool exact, std::string* report);

// Every rank holds bitwise the same parameters as rank 0.
bool check_identical_parameters(comm& c, std::span<const float> parameters, std::string* report);

}  // namespace ddp
