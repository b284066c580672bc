# FindNUMA
# --------
# Finds libnuma (Debian: libnuma-dev): mbind, move_pages and get_mempolicy for NUMA placement.
#
# Imported target:  NUMA::NUMA
# Result variables: NUMA_FOUND, NUMA_INCLUDE_DIR, NUMA_LIBRARY
# Hints:            NUMA_ROOT (CMake's <Package>_ROOT search path)
include(${CMAKE_CURRENT_LIST_DIR}/gpufeed_find_library.cmake)
gpufeed_find_library(NUMA HEADERS numaif.h numa.h NAMES numa)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NUMA
  REQUIRED_VARS NUMA_LIBRARY NUMA_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "install libnuma-dev (Debian/Ubuntu) or set NUMA_ROOT")

if(NUMA_FOUND)
  gpufeed_import_library(NUMA::NUMA NUMA)
endif()
mark_as_advanced(NUMA_INCLUDE_DIR NUMA_LIBRARY)
