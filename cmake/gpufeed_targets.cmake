# The library's INTERFACE targets. Each optional component is defined only when its dependency
# is found, and GPUFEED_COMPONENTS lists the ones that were (the install rules export exactly
# those, and gpufeedConfig.cmake refuses a component the installed copy does not have).
find_package(Threads REQUIRED)
# libnuma: the loader places its slots and workers on a NUMA node (detail/numa/).
list(PREPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")
find_package(NUMA REQUIRED)
list(POP_FRONT CMAKE_MODULE_PATH)

add_library(gpufeed INTERFACE)
add_library(gpufeed::gpufeed ALIAS gpufeed)
target_include_directories(gpufeed INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(gpufeed INTERFACE cxx_std_20)
target_link_libraries(gpufeed INTERFACE Threads::Threads NUMA::NUMA)
set(GPUFEED_COMPONENTS "")

# --- cuda: CUDA runtime, NVTX3, CCCL (Thrust/CUB). Host code compiles with the C++ compiler;
# only .cu files that use the .cuh transforms need nvcc.
if(NOT GPUFEED_ENABLE_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    find_package(CCCL CONFIG QUIET PATHS "${CUDAToolkit_LIBRARY_DIR}/cmake" NO_DEFAULT_PATH)
  endif()
  if(CUDAToolkit_FOUND AND CCCL_FOUND)
    add_library(gpufeed_cuda INTERFACE)
    add_library(gpufeed::cuda ALIAS gpufeed_cuda)
    set_target_properties(gpufeed_cuda PROPERTIES EXPORT_NAME cuda)
    target_link_libraries(gpufeed_cuda INTERFACE gpufeed CUDA::cudart CUDA::nvtx3 CCCL::CCCL)
    # Tells portable headers (gpufeed/target_choice.hpp) that the CUDA component is linked.
    target_compile_definitions(gpufeed_cuda INTERFACE GPUFEED_HAS_CUDA)
    list(APPEND GPUFEED_COMPONENTS cuda)
  elseif(GPUFEED_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GPUFEED_ENABLE_CUDA=ON but the CUDA Toolkit (with CCCL) was not found: "
                        "install CUDA 13.0 or set CUDAToolkit_ROOT")
  else()
    message(STATUS "gpufeed: CUDA Toolkit not found; the cuda component is not built")
  endif()
endif()

# --- hdf5: the C API only (the C++/HL bindings are not thread-safe). libdeflate, liblz4, libzstd
# and libblosc decode chunks in gpufeed's workers, outside HDF5's global lock; zlib compresses
# pack's deflate chunks and checksums pack's shards.
find_package(HDF5 COMPONENTS C QUIET)
find_package(ZLIB QUIET)
list(PREPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")
find_package(GpufeedCodecs QUIET)
list(POP_FRONT CMAKE_MODULE_PATH)
if(HDF5_FOUND AND ZLIB_FOUND AND GpufeedCodecs_FOUND)
  add_library(gpufeed_hdf5 INTERFACE)
  add_library(gpufeed::hdf5 ALIAS gpufeed_hdf5)
  set_target_properties(gpufeed_hdf5 PROPERTIES EXPORT_NAME hdf5)
  target_link_libraries(gpufeed_hdf5 INTERFACE gpufeed hdf5::hdf5 ZLIB::ZLIB GpufeedCodecs::deflate
                        GpufeedCodecs::lz4 GpufeedCodecs::zstd GpufeedCodecs::blosc)
  list(APPEND GPUFEED_COMPONENTS hdf5)
else()
  message(STATUS "gpufeed: HDF5 C library, zlib or a codec library not found (apt install "
                 "libhdf5-dev zlib1g-dev libdeflate-dev liblz4-dev libzstd-dev libblosc-dev); "
                 "the hdf5 component is not built")
endif()

# --- lmdb
find_package(LMDB QUIET)
if(LMDB_FOUND)
  add_library(gpufeed_lmdb INTERFACE)
  add_library(gpufeed::lmdb ALIAS gpufeed_lmdb)
  set_target_properties(gpufeed_lmdb PROPERTIES EXPORT_NAME lmdb)
  target_link_libraries(gpufeed_lmdb INTERFACE gpufeed LMDB::LMDB)
  list(APPEND GPUFEED_COMPONENTS lmdb)
else()
  message(STATUS "gpufeed: LMDB not found (apt install liblmdb-dev); the lmdb component is not built")
endif()

# --- dlpack: gpufeed/dlpack.hpp, batches as DLPack tensors (header only: dlpack/dlpack.h).
find_package(dlpack CONFIG QUIET)
if(dlpack_FOUND)
  add_library(gpufeed_dlpack INTERFACE)
  add_library(gpufeed::dlpack ALIAS gpufeed_dlpack)
  set_target_properties(gpufeed_dlpack PROPERTIES EXPORT_NAME dlpack)
  target_link_libraries(gpufeed_dlpack INTERFACE gpufeed dlpack::dlpack)
  list(APPEND GPUFEED_COMPONENTS dlpack)
else()
  message(STATUS "gpufeed: DLPack not found (apt install libdlpack-dev); the dlpack component is not built")
endif()

# --- image: gpufeed/image/ (JPEG decode through TurboJPEG, PNG through libspng; the
# augmentations and the record transform built on them).
list(PREPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")
find_package(GpufeedImage QUIET)
list(POP_FRONT CMAKE_MODULE_PATH)
if(GpufeedImage_FOUND)
  add_library(gpufeed_image INTERFACE)
  add_library(gpufeed::image ALIAS gpufeed_image)
  set_target_properties(gpufeed_image PROPERTIES EXPORT_NAME image)
  target_link_libraries(gpufeed_image INTERFACE gpufeed GpufeedImage::turbojpeg GpufeedImage::spng)
  list(APPEND GPUFEED_COMPONENTS image)
else()
  message(STATUS "gpufeed: TurboJPEG or libspng not found (apt install libturbojpeg0-dev "
                 "libspng-dev); the image component is not built")
endif()

# --- doctor: gpufeed/doctor/ (host checks, report). Its GPU checks, gpufeed/cuda/doctor/, need
# the cuda component as well. dl: NVML is loaded at run time (dlopen is in libc only from glibc
# 2.34).
add_library(gpufeed_doctor INTERFACE)
add_library(gpufeed::doctor ALIAS gpufeed_doctor)
set_target_properties(gpufeed_doctor PROPERTIES EXPORT_NAME doctor)
target_link_libraries(gpufeed_doctor INTERFACE gpufeed ${CMAKE_DL_LIBS})
list(APPEND GPUFEED_COMPONENTS doctor)

# --- pack: gpufeed/pack/ with the HDF5 writer (pack_hdf5: needs only hdf5), the LMDB writer
# (pack_lmdb: needs only lmdb, and zlib for checksums), or every writer this build has (pack).
# The defines choose the writers pack/pack.hpp compiles (see "Formats" there).
if(TARGET gpufeed_hdf5)
  add_library(gpufeed_pack_hdf5 INTERFACE)
  add_library(gpufeed::pack_hdf5 ALIAS gpufeed_pack_hdf5)
  set_target_properties(gpufeed_pack_hdf5 PROPERTIES EXPORT_NAME pack_hdf5)
  target_link_libraries(gpufeed_pack_hdf5 INTERFACE gpufeed_hdf5)
  target_compile_definitions(gpufeed_pack_hdf5 INTERFACE GPUFEED_PACK_HDF5)
  list(APPEND GPUFEED_COMPONENTS pack_hdf5)
endif()
if(NOT ZLIB_FOUND)
  find_package(ZLIB QUIET)
endif()
if(TARGET gpufeed_lmdb AND ZLIB_FOUND)
  add_library(gpufeed_pack_lmdb INTERFACE)
  add_library(gpufeed::pack_lmdb ALIAS gpufeed_pack_lmdb)
  set_target_properties(gpufeed_pack_lmdb PROPERTIES EXPORT_NAME pack_lmdb)
  target_link_libraries(gpufeed_pack_lmdb INTERFACE gpufeed_lmdb ZLIB::ZLIB)
  target_compile_definitions(gpufeed_pack_lmdb INTERFACE GPUFEED_PACK_LMDB)
  list(APPEND GPUFEED_COMPONENTS pack_lmdb)
endif()
if(TARGET gpufeed_pack_hdf5 OR TARGET gpufeed_pack_lmdb)
  add_library(gpufeed_pack INTERFACE)
  add_library(gpufeed::pack ALIAS gpufeed_pack)
  set_target_properties(gpufeed_pack PROPERTIES EXPORT_NAME pack)
  foreach(f hdf5 lmdb)
    if(TARGET gpufeed_pack_${f})
      target_link_libraries(gpufeed_pack INTERFACE gpufeed_pack_${f})
    endif()
  endforeach()
  list(APPEND GPUFEED_COMPONENTS pack)
endif()

# --- all: every component this build has.
add_library(gpufeed_all INTERFACE)
add_library(gpufeed::all ALIAS gpufeed_all)
set_target_properties(gpufeed_all PROPERTIES EXPORT_NAME all)
target_link_libraries(gpufeed_all INTERFACE gpufeed)
foreach(c IN LISTS GPUFEED_COMPONENTS)
  target_link_libraries(gpufeed_all INTERFACE gpufeed_${c})
endforeach()
