# FindGpufeedCodecs
# -----------------
# Finds the codec libraries gpufeed's HDF5 reader decodes chunks with, in its workers outside
# HDF5's lock: libdeflate (deflate), liblz4 (LZ4, Bitshuffle-LZ4), libzstd (Zstd, Bitshuffle-Zstd)
# and libblosc (Blosc). Debian: libdeflate-dev liblz4-dev libzstd-dev libblosc-dev. pkg-config,
# when present, supplies search hints (each library ships a .pc file).
#
# Imported targets: GpufeedCodecs::deflate, ::lz4, ::zstd, ::blosc
# Result variable:  GpufeedCodecs_FOUND
find_package(PkgConfig QUIET)
set(_gpufeed_codec_vars)
foreach(_spec "deflate;libdeflate;libdeflate.h;deflate" "lz4;liblz4;lz4.h;lz4"
              "zstd;libzstd;zstd.h;zstd" "blosc;blosc;blosc.h;blosc")
  list(GET _spec 0 _name)
  list(GET _spec 1 _pc)
  list(GET _spec 2 _header)
  list(GET _spec 3 _lib)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(_gpufeed_pc_${_name} QUIET ${_pc})
  endif()
  find_path(GpufeedCodecs_${_name}_INCLUDE_DIR NAMES ${_header}
            HINTS ${_gpufeed_pc_${_name}_INCLUDE_DIRS})
  find_library(GpufeedCodecs_${_name}_LIBRARY NAMES ${_lib}
               HINTS ${_gpufeed_pc_${_name}_LIBRARY_DIRS})
  list(APPEND _gpufeed_codec_vars GpufeedCodecs_${_name}_LIBRARY GpufeedCodecs_${_name}_INCLUDE_DIR)
endforeach()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(GpufeedCodecs
  REQUIRED_VARS ${_gpufeed_codec_vars}
  REASON_FAILURE_MESSAGE "install libdeflate-dev liblz4-dev libzstd-dev libblosc-dev (Debian/Ubuntu)")

if(GpufeedCodecs_FOUND)
  foreach(_name deflate lz4 zstd blosc)
    if(NOT TARGET GpufeedCodecs::${_name})
      add_library(GpufeedCodecs::${_name} UNKNOWN IMPORTED)
      set_target_properties(GpufeedCodecs::${_name} PROPERTIES
        IMPORTED_LOCATION "${GpufeedCodecs_${_name}_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${GpufeedCodecs_${_name}_INCLUDE_DIR}")
    endif()
  endforeach()
endif()
