// gpufeed::detail — a loader worker's identity. Telemetry counters and trace tracks are keyed by
// it, not by a position in a vector, so a worker added (or removed) while the loader runs would
// not shift another worker's times or events onto the wrong name.
#pragma once

#include <compare>
#include <cstddef>

namespace gpufeed::detail::loading {

struct worker_id {
  std::size_t value = 0;

  constexpr worker_id() noexcept = default;
  constexpr explicit worker_id(std::size_t v) noexcept : value(v) {}
  friend constexpr auto operator<=>(worker_id, worker_id) noexcept = default;
};

}  // namespace gpufeed::detail::loading
