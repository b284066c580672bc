// gpufeed::detail — rank and world size from the launcher's environment.
//
// Checked in this order (the first launcher whose variables are both set wins):
//   GPUFEED_RANK / GPUFEED_WORLD_SIZE          explicit override
//   RANK / WORLD_SIZE                          torchrun, torch.distributed.launch
//   OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE  Open MPI mpirun
//   PMI_RANK / PMI_SIZE                        MPICH, Intel MPI (Hydra)
//   PMIX_RANK / (OMPI_UNIVERSE_SIZE)           not used: PMIx has no portable size variable
//   SLURM_PROCID / SLURM_NTASKS                srun
// None set: rank 0 of 1. A set but malformed value is an error, never silently ignored.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "gpufeed/error.hpp"

namespace gpufeed::detail {

struct rank_world {
  std::uint32_t rank = 0;
  std::uint32_t world = 1;
  std::string origin = "default (no launcher variables set)";
};

inline std::uint32_t parse_env_uint(const char* name, const char* value) {
  std::uint32_t v = 0;
  const std::string_view s(value);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty())
    throw config_error(std::string("environment variable ") + name + "='" + value +
                       "' is not a non-negative integer");
  return v;
}

// getenv is injectable for tests.
template <class Getenv>
rank_world rank_world_from_environment(Getenv&& get) {
  static constexpr std::pair<const char*, const char*> launchers[] = {
      {"GPUFEED_RANK", "GPUFEED_WORLD_SIZE"},
      {"RANK", "WORLD_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS"},
  };
  for (const auto& [rank_var, world_var] : launchers) {
    const char* r = get(rank_var);
    const char* w = get(world_var);
    if (!r || !w) continue;
    rank_world out;
    out.rank = parse_env_uint(rank_var, r);
    out.world = parse_env_uint(world_var, w);
    out.origin = std::string(rank_var) + "/" + world_var;
    if (out.world == 0 || out.rank >= out.world)
      throw config_error("launcher environment gives rank " + std::to_string(out.rank) +
                         " of world size " + std::to_string(out.world) + " (" + out.origin + ")");
    return out;
  }
  return {};
}

inline rank_world rank_world_from_environment() {
  return rank_world_from_environment([](const char* n) { return std::getenv(n); });
}

}  // namespace gpufeed::detail
