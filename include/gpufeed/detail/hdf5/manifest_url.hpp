// gpufeed — a pack's manifest.json named by a URL, given where shards are expected: it stands for
// the shards it lists, each named by the manifest's URL with its last path segment replaced by
// the shard's file name ("https://host/shards/manifest.json" lists "train-00000.h5": the shard is
// "https://host/shards/train-00000.h5"; s3:// alike). The manifest's query (a presigned URL's
// signature) is not carried over: it signs the manifest alone.
//
// The manifest is fetched once, with one ranged GET of its whole size through the remote
// component's reader (url_reader.hpp), so the same errors apply: config_error without the remote
// component, io_error naming the URL (redacted) when it cannot be read. What the manifest holds
// is checked as for a local pack directory (detail/pack_directory.hpp).
#pragma once

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gpufeed/detail/hdf5/url_reader.hpp"
#include "gpufeed/detail/pack_manifest.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/hdf5_options.hpp"

namespace gpufeed::detail::hdf5 {

// A manifest larger than this is refused: pack writes about 200 bytes per shard.
inline constexpr std::uint64_t max_manifest_url_bytes = std::uint64_t{64} << 20;

// True when url names a pack manifest: its path (before any query) ends in "/manifest.json".
[[nodiscard]] inline bool is_manifest_url(std::string_view url) noexcept {
  if (!remote::is_remote_url(url)) return false;
  const std::string_view path = url.substr(0, url.find_first_of("?#"));
  const std::string tail = std::string("/") + manifest_file_name;
  return path.size() > tail.size() && path.ends_with(tail);
}

// The URL of `name` beside the manifest at `manifest_url` (is_manifest_url).
[[nodiscard]] inline std::string url_beside(std::string_view manifest_url, const std::string& name) {
  const std::string_view path = manifest_url.substr(0, manifest_url.find_first_of("?#"));
  return std::string(path.substr(0, path.rfind('/') + 1)) + name;
}

// The shard URLs the manifest at `url` lists, in record order. format_error naming the URL
// (redacted) when it is not a complete pack manifest of `want_format` shards, or names a shard
// with a character a URL path cannot carry as written; errors of open_url_reader otherwise.
[[nodiscard]] inline std::vector<std::filesystem::path> manifest_url_shards(
    const std::string& url, const char* want_format) {
  const std::string shown = remote::redact_url(url);
  const io::owned_source src = open_url_reader(url, hdf5_options{});
  if (src.size() > max_manifest_url_bytes)
    throw format_error("not a pack manifest: " + std::to_string(src.size()) + " bytes",
                       file_context(shown));
  std::string text(static_cast<std::size_t>(src.size()), '\0');
  if (!text.empty()) src.read_exact(text.data(), text.size(), 0);
  const auto m = parse_pack_manifest(text, shown);
  if (!m || m->order.empty())
    throw format_error("not a complete gpufeed pack manifest (truncated, or written by another "
                       "tool): the pack may not have finished",
                       file_context(shown));
  if (m->format != want_format)
    throw format_error("the pack holds " + m->format + " shards, not " + want_format,
                       file_context(shown));
  std::vector<std::filesystem::path> shards;
  for (const std::string& name : m->order) {
    for (const char c : name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
        throw format_error("the manifest lists shard '" + name +
                               "', whose name a URL cannot carry as written",
                           file_context(shown));
    shards.emplace_back(url_beside(url, name));
  }
  return shards;
}

// A source's shard list as given, or the shards of the one manifest URL given.
[[nodiscard]] inline std::vector<std::filesystem::path> expand_manifest_url(
    std::vector<std::filesystem::path> shards, const char* want_format) {
  if (shards.size() != 1 || !is_manifest_url(shards.front().native())) return shards;
  return manifest_url_shards(shards.front().native(), want_format);
}

}  // namespace gpufeed::detail::hdf5
