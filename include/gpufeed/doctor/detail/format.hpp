// Plain-language number formatting for the doctor's report, and PCIe link arithmetic.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace gpufeed::detail::doctor {

// "%.*f" into a std::string.
inline std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// "52.9 GB/s" (decimal units: what PCIe and storage vendors quote). Below 10 GB/s two decimals,
// below 1 GB/s in MB/s, so slow rates are still distinguishable.
inline std::string gbps(double v) {
  if (v < 1.0) return fixed(v * 1000.0, v < 0.01 ? 2 : 0) + " MB/s";
  return fixed(v, v < 10.0 ? 2 : 1) + " GB/s";
}

// "64 KiB", "1.5 GiB", "256 MiB": binary units, one decimal unless the value is whole.
inline std::string bytes(std::uint64_t n) {
  static constexpr const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return std::to_string(n) + " bytes";
  const bool whole = v == static_cast<double>(static_cast<std::uint64_t>(v));
  return fixed(v, whole ? 0 : 1) + " " + units[u];
}

// Payload rate of one PCIe lane in GB/s after line encoding (8b/10b for Gen1-2, 128b/130b for
// Gen3-5, FLIT 242/256 for Gen6-7); 0 for an unknown generation. Packet (TLP) overheads come on
// top, which is why a Gen5 x16 link (63.0 GB/s here) delivers about 53 GB/s to real copies.
inline double pcie_lane_gbps(unsigned generation) noexcept {
  switch (generation) {
    case 1: return 2.5 * 0.8 / 8.0;
    case 2: return 5.0 * 0.8 / 8.0;
    case 3: return 8.0 * 128.0 / 130.0 / 8.0;
    case 4: return 16.0 * 128.0 / 130.0 / 8.0;
    case 5: return 32.0 * 128.0 / 130.0 / 8.0;
    case 6: return 64.0 * 242.0 / 256.0 / 8.0;
    case 7: return 128.0 * 242.0 / 256.0 / 8.0;
    default: return 0.0;
  }
}

// What a link of this generation and width carries in one direction, GB/s; 0 when unknown.
inline double pcie_link_gbps(unsigned generation, unsigned width) noexcept {
  return pcie_lane_gbps(generation) * width;
}

// "PCIe Gen5 x16".
inline std::string pcie_link_name(unsigned generation, unsigned width) {
  return "PCIe Gen" + std::to_string(generation) + " x" + std::to_string(width);
}

}  // namespace gpufeed::detail::doctor
