# FindLMDB
# --------
# Finds the Lightning Memory-Mapped Database library (Debian: liblmdb-dev).
#
# Imported target:  LMDB::LMDB
# Result variables: LMDB_FOUND, LMDB_INCLUDE_DIR, LMDB_LIBRARY, LMDB_VERSION
# Hints:            LMDB_ROOT (CMake's <Package>_ROOT search path)
include(${CMAKE_CURRENT_LIST_DIR}/gpufeed_find_library.cmake)
gpufeed_find_library(LMDB HEADERS lmdb.h NAMES lmdb)

if(LMDB_INCLUDE_DIR AND EXISTS "${LMDB_INCLUDE_DIR}/lmdb.h")
  file(STRINGS "${LMDB_INCLUDE_DIR}/lmdb.h" _lmdb_ver REGEX "^#define MDB_VERSION_(MAJOR|MINOR|PATCH)[ \t]+[0-9]+")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*MDB_VERSION_${part}[ \t]+([0-9]+).*" "\\1" _lmdb_${part} "${_lmdb_ver}")
  endforeach()
  set(LMDB_VERSION "${_lmdb_MAJOR}.${_lmdb_MINOR}.${_lmdb_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LMDB
  REQUIRED_VARS LMDB_LIBRARY LMDB_INCLUDE_DIR
  VERSION_VAR LMDB_VERSION
  REASON_FAILURE_MESSAGE "install liblmdb-dev (Debian/Ubuntu) or set LMDB_ROOT")

if(LMDB_FOUND)
  gpufeed_import_library(LMDB::LMDB LMDB)
endif()
mark_as_advanced(LMDB_INCLUDE_DIR LMDB_LIBRARY)
