// ddp_train's checkpoint: the loader's sampler_state (the same on every rank), the parameters
// (the same on every rank) and, for --check across a resume, the records the ranks delivered so
// far in the state's epoch. Rank 0 writes it (to a temporary name, then renamed, so a crash
// leaves the previous checkpoint whole); every rank reads it. Binary, little-endian, versioned.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gpufeed/sampler.hpp"

namespace ddp {

struct checkpoint {
  gpufeed::sampler_state state;
  std::uint64_t records = 0;                // the dataset's size, checked on resume
  std::uint64_t steps = 0;                  // steps taken since the start of training
  std::vector<float> parameters;
  std::vector<std::uint64_t> delivered;     // this epoch's records so far, all ranks
};

// Errors name the file: io_error when it cannot be opened or written, format_error when it is
// not a checkpoint of this format, corrupt_error when it is truncated, or when an array's
// declared length (and field) needs more bytes than the file holds after it: checked before
// anything is allocated for it.
void write_checkpoint(const std::filesystem::path& file, const checkpoint& c);
checkpoint read_checkpoint(const std::filesystem::path& file);

}  // namespace ddp
