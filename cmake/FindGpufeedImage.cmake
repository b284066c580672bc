# FindGpufeedImage
# ----------------
# Finds the libraries gpufeed's image component decodes with: libjpeg-turbo's TurboJPEG API
# (JPEG) and libspng (PNG). Debian: libturbojpeg0-dev libspng-dev. pkg-config, when present,
# supplies search hints.
#
# Imported targets: GpufeedImage::turbojpeg, ::spng
# Result variable:  GpufeedImage_FOUND
include(${CMAKE_CURRENT_LIST_DIR}/gpufeed_find_library.cmake)
gpufeed_find_library(GpufeedImage_turbojpeg HEADERS turbojpeg.h NAMES turbojpeg
                     PKG_CONFIG libturbojpeg)
gpufeed_find_library(GpufeedImage_spng HEADERS spng.h NAMES spng PKG_CONFIG spng)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(GpufeedImage
  REQUIRED_VARS GpufeedImage_turbojpeg_LIBRARY GpufeedImage_turbojpeg_INCLUDE_DIR
                GpufeedImage_spng_LIBRARY GpufeedImage_spng_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "install libturbojpeg0-dev libspng-dev (Debian/Ubuntu)")

if(GpufeedImage_FOUND)
  foreach(_name turbojpeg spng)
    gpufeed_import_library(GpufeedImage::${_name} GpufeedImage_${_name})
  endforeach()
endif()
