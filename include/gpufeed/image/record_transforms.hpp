// gpufeed::image — ready-made record transforms (record_transform.hpp) that decode and crop
// JPEG/PNG records in the loader's workers:
//
//   gpufeed::loader_config c;
//   c.per_record = gpufeed::image::random_resized_crop_transform({.size = 224});   // training
//   c.per_record = gpufeed::image::center_crop_transform({.resize = 256, .size = 224});  // eval
//
// Each record becomes size x size x 3 uint8 RGB (HWC, or CHW with .layout = chw): fixed-size
// outputs, so batch::record_bytes() == size * size * 3 and a cuda::normalize_transform over the
// same layout applies as it is. The crop and flip are drawn from the record's record_rng, so
// they depend on (seed, epoch, record) only: the same whatever the worker count or resume point.
//
// Errors: a corrupt or truncated image is a corrupt_error, a record that is no image a
// format_error, an image over decoder.max_pixels an unsupported_error; the loader's error policy
// then applies, and the error names the shard and record (the stage adds the shard).
//
// Thread safety: the transforms are copyable (copies share one pool) and safe to call from every
// worker at once; each call borrows a decoder + scratch from the pool (detail/image/
// instance_pool.hpp), so no call allocates once every worker has decoded its largest image.
#pragma once

#include <memory>
#include <span>

#include "gpufeed/detail/image/instance_pool.hpp"
#include "gpufeed/image/crop_decode.hpp"
#include "gpufeed/record_transform.hpp"

namespace gpufeed::image {

namespace detail_transforms {
template <class Crop, class Options>
auto make_pool(const Options& o) {
  auto make = [o] { return Crop(o); };
  return std::make_shared<detail::image::instance_pool<Crop, decltype(make)>>(make);
}
inline error_context record_context(const record_input& in) {
  error_context c;
  c.record = in.index;
  return c;
}
}  // namespace detail_transforms

// RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip() of each record (train_crop).
inline record_transform random_resized_crop_transform(train_crop_options o = {}) {
  if (o.size <= 0) throw config_error("random_resized_crop_transform: size must be positive");
  auto pool = detail_transforms::make_pool<train_crop>(o);
  const std::size_t n = static_cast<std::size_t>(o.size) * static_cast<std::size_t>(o.size) * 3;
  return record_transform::fixed(
      n, [pool](const record_input& in, std::span<std::byte> out, record_rng& rng) {
        pool->with([&](train_crop& crop) {
          crop(in.bytes, rng, out, detail_transforms::record_context(in));
        });
      });
}

// Resize(resize) + CenterCrop(size) of each record (eval_crop); draws nothing from the rng.
inline record_transform center_crop_transform(eval_crop_options o = {}) {
  if (o.size <= 0 || o.resize <= 0)
    throw config_error("center_crop_transform: resize and size must be positive");
  auto pool = detail_transforms::make_pool<eval_crop>(o);
  const std::size_t n = static_cast<std::size_t>(o.size) * static_cast<std::size_t>(o.size) * 3;
  return record_transform::fixed(
      n, [pool](const record_input& in, std::span<std::byte> out, record_rng&) {
        pool->with([&](eval_crop& crop) {
          crop(in.bytes, out, detail_transforms::record_context(in));
        });
      });
}

}  // namespace gpufeed::image
