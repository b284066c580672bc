# FindNUMA
# --------
# Finds libnuma (Debian: libnuma-dev): mbind, move_pages and get_mempolicy for NUMA placement.
#
# Imported target:  NUMA::NUMA
# Result variables: NUMA_FOUND, NUMA_INCLUDE_DIR, NUMA_LIBRARY
# Hints:            NUMA_ROOT (CMake's <Package>_ROOT search path)
find_path(NUMA_INCLUDE_DIR NAMES numaif.h numa.h)
find_library(NUMA_LIBRARY NAMES numa)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NUMA
  REQUIRED_VARS NUMA_LIBRARY NUMA_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "install libnuma-dev (Debian/Ubuntu) or set NUMA_ROOT")

if(NUMA_FOUND AND NOT TARGET NUMA::NUMA)
  add_library(NUMA::NUMA UNKNOWN IMPORTED)
  set_target_properties(NUMA::NUMA PROPERTIES
    IMPORTED_LOCATION "${NUMA_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NUMA_INCLUDE_DIR}")
endif()
mark_as_advanced(NUMA_INCLUDE_DIR NUMA_LIBRARY)
