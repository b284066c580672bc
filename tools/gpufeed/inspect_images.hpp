// gpufeed inspect's image line: for a sample of a shard's records (at most 5, evenly spaced),
// the image format and width x height from the JPEG/PNG header (no pixel decoded), or why a
// record is no image. Built when the image component is (GPUFEED_CLI_HAS_IMAGE).
#pragma once

#ifdef GPUFEED_CLI_HAS_IMAGE

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpufeed/image/decoder.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::cli {

// {"sampled": n, "records": [{"index", "format", "width", "height"} or {"index", "error"}]}
template <class Source>
nlohmann::ordered_json image_sample(const Source& s, std::uint64_t first) {
  nlohmann::ordered_json j;
  const std::uint64_t n = s.size(), k = n < 5 ? n : 5;
  j["sampled"] = k;
  j["records"] = nlohmann::ordered_json::array();
  image::image_decoder dec;
  auto reader = make_reader(s);
  std::vector<std::byte> buf;
  for (std::uint64_t t = 0; t < k; ++t) {
    const std::uint64_t i = k > 1 ? t * (n - 1) / (k - 1) : 0;
    nlohmann::ordered_json r;
    r["index"] = first + i;
    buf.resize(s.record_size(i));
    reader.read(i, std::span<std::byte>(buf.data(), buf.size()));
    try {
      const image::image_header h = dec.header(buf);
      r["format"] = h.format == image::image_format::jpeg ? "JPEG" : "PNG";
      r["width"] = h.width;
      r["height"] = h.height;
    } catch (const format_error&) {
      r["error"] = "not an image";
    } catch (const error& e) {
      r["error"] = e.message();
    }
    j["records"].push_back(std::move(r));
  }
  return j;
}

// "  images     JPEG 640 x 480, JPEG 500 x 375 (2 of 2 sampled records)", or "none" when no
// sampled record is an image.
inline void print_image_sample(const nlohmann::ordered_json& j) {
  std::string sizes;
  std::uint64_t images = 0;
  for (const auto& r : j["records"]) {
    if (!r.contains("width")) continue;
    ++images;
    sizes += (sizes.empty() ? "" : ", ") + r["format"].get<std::string>() + " " +
             std::to_string(r["width"].get<int>()) + " x " + std::to_string(r["height"].get<int>());
  }
  const auto sampled = j["sampled"].get<std::uint64_t>();
  if (images == 0) {
    std::printf("  images     none in %llu sampled record%s\n",
                static_cast<unsigned long long>(sampled), sampled == 1 ? "" : "s");
    return;
  }
  std::printf("  images     %s (%llu of %llu sampled records)\n", sizes.c_str(),
              static_cast<unsigned long long>(images), static_cast<unsigned long long>(sampled));
}

}  // namespace gpufeed::cli

#endif  // GPUFEED_CLI_HAS_IMAGE
