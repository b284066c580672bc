# FindGpufeedImage
# ----------------
# Finds the libraries gpufeed's image component decodes with: libjpeg-turbo's TurboJPEG API
# (JPEG) and libspng (PNG). Debian: libturbojpeg0-dev libspng-dev. pkg-config, when present,
# supplies search hints.
#
# Imported targets: GpufeedImage::turbojpeg, ::spng
# Result variable:  GpufeedImage_FOUND
find_package(PkgConfig QUIET)
set(_gpufeed_image_vars)
foreach(_spec "turbojpeg;libturbojpeg;turbojpeg.h;turbojpeg" "spng;spng;spng.h;spng")
  list(GET _spec 0 _name)
  list(GET _spec 1 _pc)
  list(GET _spec 2 _header)
  list(GET _spec 3 _lib)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(_gpufeed_pc_${_name} QUIET ${_pc})
  endif()
  find_path(GpufeedImage_${_name}_INCLUDE_DIR NAMES ${_header}
            HINTS ${_gpufeed_pc_${_name}_INCLUDE_DIRS})
  find_library(GpufeedImage_${_name}_LIBRARY NAMES ${_lib}
               HINTS ${_gpufeed_pc_${_name}_LIBRARY_DIRS})
  list(APPEND _gpufeed_image_vars GpufeedImage_${_name}_LIBRARY GpufeedImage_${_name}_INCLUDE_DIR)
endforeach()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(GpufeedImage
  REQUIRED_VARS ${_gpufeed_image_vars}
  REASON_FAILURE_MESSAGE "install libturbojpeg0-dev libspng-dev (Debian/Ubuntu)")

if(GpufeedImage_FOUND)
  foreach(_name turbojpeg spng)
    if(NOT TARGET GpufeedImage::${_name})
      add_library(GpufeedImage::${_name} UNKNOWN IMPORTED)
      set_target_properties(GpufeedImage::${_name} PROPERTIES
        IMPORTED_LOCATION "${GpufeedImage_${_name}_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${GpufeedImage_${_name}_INCLUDE_DIR}")
    endif()
  endforeach()
endif()
