# The library's INTERFACE targets. Each optional component is defined only when its dependency
# is found, and GPUFEED_COMPONENTS lists the ones that were (the install rules export exactly
# those, and gpufeedConfig.cmake refuses a component the installed copy does not have).
find_package(Threads REQUIRED)

add_library(gpufeed INTERFACE)
add_library(gpufeed::gpufeed ALIAS gpufeed)
target_include_directories(gpufeed INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(gpufeed INTERFACE cxx_std_20)
target_link_libraries(gpufeed INTERFACE Threads::Threads)
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
    # dl: NVML is loaded at run time by the doctor (dlopen is in libc only from glibc 2.34).
    target_link_libraries(gpufeed_cuda INTERFACE gpufeed CUDA::cudart CUDA::nvtx3 CCCL::CCCL
                          ${CMAKE_DL_LIBS})
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

# --- all: every component this build has.
add_library(gpufeed_all INTERFACE)
add_library(gpufeed::all ALIAS gpufeed_all)
set_target_properties(gpufeed_all PROPERTIES EXPORT_NAME all)
target_link_libraries(gpufeed_all INTERFACE gpufeed)
foreach(c IN LISTS GPUFEED_COMPONENTS)
  target_link_libraries(gpufeed_all INTERFACE gpufeed_${c})
endforeach()
