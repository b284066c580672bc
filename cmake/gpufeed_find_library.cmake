# Shared by gpufeed's find modules (FindLMDB, FindNUMA, FindGpufeedCodecs, FindGpufeedImage),
# installed beside them.
#
# gpufeed_find_library(<var> HEADERS <h>... NAMES <lib>... [PKG_CONFIG <module>])
#   Sets the cache entries <var>_INCLUDE_DIR (where the first of HEADERS found lies) and
#   <var>_LIBRARY. With PKG_CONFIG, the module's pkg-config directories, when pkg-config has
#   it, are search hints.
# gpufeed_import_library(<target> <var>)
#   Creates the UNKNOWN IMPORTED <target> from <var>_LIBRARY and <var>_INCLUDE_DIR, unless it
#   exists already. Call once the package is found.
include_guard(GLOBAL)

function(gpufeed_find_library var)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PKG_CONFIG" "HEADERS;NAMES")
  if(arg_PKG_CONFIG)
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(_gpufeed_pc_${var} QUIET ${arg_PKG_CONFIG})
    endif()
  endif()
  find_path(${var}_INCLUDE_DIR NAMES ${arg_HEADERS} HINTS ${_gpufeed_pc_${var}_INCLUDE_DIRS})
  find_library(${var}_LIBRARY NAMES ${arg_NAMES} HINTS ${_gpufeed_pc_${var}_LIBRARY_DIRS})
endfunction()

function(gpufeed_import_library target var)
  if(NOT TARGET ${target})
    add_library(${target} UNKNOWN IMPORTED)
    set_target_properties(${target} PROPERTIES
      IMPORTED_LOCATION "${${var}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${${var}_INCLUDE_DIR}")
  endif()
endfunction()
