// ddp_train's data: a learnable synthetic classification set, packed into HDF5 shards with
// gpufeed::pack. Record i is `features` float32 values (little-endian, back to back) drawn from a
// normal distribution around its class's mean; its label is i % classes. The class means are
// normal draws too, scaled by `separation`, so a linear model (or the MLP) can learn the classes
// but not perfectly: the loss falls from ln(classes) and levels off above zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

namespace ddp {

struct dataset_spec {
  std::size_t records = 2400;
  std::size_t features = 32;
  std::size_t classes = 4;
  double separation = 0.3;
  std::uint64_t seed = 7;
};

// The shards of the dataset in dir/shards (packing it first when dir holds none). Call it on
// one rank (the others wait at a barrier, then call it to read the listing). Throws
// config_error naming dir/spec.txt when dir holds a dataset of another spec.
std::vector<std::filesystem::path> prepare_dataset(const std::filesystem::path& dir,
                                                   const dataset_spec& spec);

}  // namespace ddp
