// gpufeed — the library version (kept equal to project(VERSION) in CMakeLists.txt; the pack tests'
// CMake file checks that at configure time).
#pragma once

#define GPUFEED_VERSION_MAJOR 0
#define GPUFEED_VERSION_MINOR 1
#define GPUFEED_VERSION_PATCH 0
#define GPUFEED_VERSION_STRING "0.1.0"

namespace gpufeed {
inline constexpr const char* version_string = GPUFEED_VERSION_STRING;
}  // namespace gpufeed
