// gpufeed inspect's image line: for a sample of a shard's records (at most 5, evenly spaced),
// the image format and width x height from the JPEG/PNG header (no pixel decoded), or why a
// record is no image, with the input file it was packed from when the shard stores names
// (record_naming_source; looked up for those records only). Built when the image component is
// (GPUFEED_CLI_HAS_IMAGE).
#pragma once

#ifdef GPUFEED_CLI_HAS_IMAGE

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpufeed/image/decoder.hpp"
#include "gpufeed/source.hpp"
#include "report.hpp"

namespace gpufeed::cli {

// Sets r["input"] to record i's input name when the source knows it; a failed lookup leaves it
// out (the record's own error is what inspect reports).
template <class Source>
void add_input_name(nlohmann::ordered_json& r, const Source& s, std::uint64_t i) {
  if constexpr (record_naming_source<Source>) {
    try {
      if (auto name = s.name_of(i)) r["input"] = *name;
    } catch (const error&) {
    }
  }
}

// {"sampled": n, "records": [{"index", "format", "width", "height"} or
// {"index", "error"[, "input"]}]}
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
      add_input_name(r, s, i);
    } catch (const error& e) {
      r["error"] = e.message();
      add_input_name(r, s, i);
    }
    j["records"].push_back(std::move(r));
  }
  return j;
}

// "  images     JPEG 640 x 480, JPEG 500 x 375 (2 of 3 sampled records)", or "none" when no
// sampled record is an image; when some are, a line per sampled record that is not:
// "             record 7, input 'b/readme.jpg': not an image" (the input when known).
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
  for (const auto& r : j["records"]) {
    if (!r.contains("error")) continue;
    const std::string input =
        r.contains("input") ? ", input '" + r["input"].get<std::string>() + "'" : "";
    std::printf("             record %llu%s: %s\n",
                static_cast<unsigned long long>(r["index"].get<std::uint64_t>()),
                one_line(input).c_str(), one_line(r["error"].get<std::string>()).c_str());
  }
}

}  // namespace gpufeed::cli

#endif  // GPUFEED_CLI_HAS_IMAGE
