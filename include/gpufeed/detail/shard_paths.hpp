// gpufeed — the shard lists the sources' constructors accept, turned into one vector of paths.
#pragma once

#include <concepts>
#include <filesystem>
#include <ranges>
#include <utility>
#include <vector>

namespace gpufeed::detail {

// Any input range of path-like values (std::vector<std::string>, std::array<const char*, N>, a
// std::views::transform of names, ...), but not a single path or string: those are ranges too
// (of path elements, of chars) and mean one shard.
template <class R>
concept shard_path_range =
    std::ranges::input_range<R> &&
    std::convertible_to<std::ranges::range_reference_t<R>, std::filesystem::path> &&
    !std::convertible_to<R, std::filesystem::path>;

template <shard_path_range R>
std::vector<std::filesystem::path> to_shard_paths(R&& shards) {
  std::vector<std::filesystem::path> out;
  if constexpr (std::ranges::sized_range<R>) out.reserve(std::ranges::size(shards));
  for (auto&& s : shards) out.emplace_back(std::forward<decltype(s)>(s));
  return out;
}

}  // namespace gpufeed::detail
