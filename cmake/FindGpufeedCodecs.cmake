# FindGpufeedCodecs
# -----------------
# Finds the codec libraries gpufeed's HDF5 reader decodes chunks with, in its workers outside
# HDF5's lock: libdeflate (deflate), liblz4 (LZ4, Bitshuffle-LZ4), libzstd (Zstd, Bitshuffle-Zstd)
# and libblosc (Blosc). Debian: libdeflate-dev liblz4-dev libzstd-dev libblosc-dev. pkg-config,
# when present, supplies search hints (each library ships a .pc file).
#
# Imported targets: GpufeedCodecs::deflate, ::lz4, ::zstd, ::blosc
# Result variable:  GpufeedCodecs_FOUND
include(${CMAKE_CURRENT_LIST_DIR}/gpufeed_find_library.cmake)
gpufeed_find_library(GpufeedCodecs_deflate HEADERS libdeflate.h NAMES deflate
                     PKG_CONFIG libdeflate)
gpufeed_find_library(GpufeedCodecs_lz4 HEADERS lz4.h NAMES lz4 PKG_CONFIG liblz4)
gpufeed_find_library(GpufeedCodecs_zstd HEADERS zstd.h NAMES zstd PKG_CONFIG libzstd)
gpufeed_find_library(GpufeedCodecs_blosc HEADERS blosc.h NAMES blosc PKG_CONFIG blosc)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(GpufeedCodecs
  REQUIRED_VARS GpufeedCodecs_deflate_LIBRARY GpufeedCodecs_deflate_INCLUDE_DIR
                GpufeedCodecs_lz4_LIBRARY GpufeedCodecs_lz4_INCLUDE_DIR
                GpufeedCodecs_zstd_LIBRARY GpufeedCodecs_zstd_INCLUDE_DIR
                GpufeedCodecs_blosc_LIBRARY GpufeedCodecs_blosc_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "install libdeflate-dev liblz4-dev libzstd-dev libblosc-dev (Debian/Ubuntu)")

if(GpufeedCodecs_FOUND)
  foreach(_name deflate lz4 zstd blosc)
    gpufeed_import_library(GpufeedCodecs::${_name} GpufeedCodecs_${_name})
  endforeach()
endif()
