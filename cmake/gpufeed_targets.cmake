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

# gpufeed_component(<name> <libraries>...): the INTERFACE target gpufeed_<name> (alias
# gpufeed::<name>, exported as <name>) linking <libraries>, appended to GPUFEED_COMPONENTS.
macro(gpufeed_component name)
  add_library(gpufeed_${name} INTERFACE)
  add_library(gpufeed::${name} ALIAS gpufeed_${name})
  set_target_properties(gpufeed_${name} PROPERTIES EXPORT_NAME ${name})
  target_link_libraries(gpufeed_${name} INTERFACE ${ARGN})
  list(APPEND GPUFEED_COMPONENTS ${name})
endmacro()

# --- cuda: CUDA runtime, NVTX3, CCCL (Thrust/CUB). Host code compiles with the C++ compiler;
# only .cu files that use the .cuh transforms need nvcc.
if(NOT GPUFEED_ENABLE_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    find_package(CCCL CONFIG QUIET PATHS "${CUDAToolkit_LIBRARY_DIR}/cmake" NO_DEFAULT_PATH)
  endif()
  if(CUDAToolkit_FOUND AND CCCL_FOUND)
    gpufeed_component(cuda gpufeed CUDA::cudart CUDA::nvtx3 CCCL::CCCL)
    # Tells portable headers (gpufeed/target_choice.hpp) that the CUDA component is linked.
    target_compile_definitions(gpufeed_cuda INTERFACE GPUFEED_HAS_CUDA)
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
  gpufeed_component(hdf5 gpufeed hdf5::hdf5 ZLIB::ZLIB GpufeedCodecs::deflate GpufeedCodecs::lz4
                    GpufeedCodecs::zstd GpufeedCodecs::blosc)
else()
  message(STATUS "gpufeed: HDF5 C library, zlib or a codec library not found (apt install "
                 "libhdf5-dev zlib1g-dev libdeflate-dev liblz4-dev libzstd-dev libblosc-dev); "
                 "the hdf5 component is not built")
endif()

# --- lmdb
find_package(LMDB QUIET)
if(LMDB_FOUND)
  gpufeed_component(lmdb gpufeed LMDB::LMDB)
else()
  message(STATUS "gpufeed: LMDB not found (apt install liblmdb-dev); the lmdb component is not built")
endif()

# --- dlpack: gpufeed/dlpack.hpp, batches as DLPack tensors (header only: dlpack/dlpack.h).
find_package(dlpack CONFIG QUIET)
if(dlpack_FOUND)
  gpufeed_component(dlpack gpufeed dlpack::dlpack)
else()
  message(STATUS "gpufeed: DLPack not found (apt install libdlpack-dev); the dlpack component is not built")
endif()

# --- image: gpufeed/image/ (JPEG decode through TurboJPEG, PNG through libspng; the
# augmentations and the record transform built on them). dl: nvJPEG, for decoding on the GPU, is
# loaded at run time (detail/image/nvjpeg_library.hpp), never linked.
list(PREPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")
find_package(GpufeedImage QUIET)
list(POP_FRONT CMAKE_MODULE_PATH)
if(GpufeedImage_FOUND)
  gpufeed_component(image gpufeed GpufeedImage::turbojpeg GpufeedImage::spng ${CMAKE_DL_LIBS})
else()
  message(STATUS "gpufeed: TurboJPEG or libspng not found (apt install libturbojpeg0-dev "
                 "libspng-dev); the image component is not built")
endif()


# --- doctor: gpufeed/doctor/ (host checks, report). Its GPU checks, gpufeed/cuda/doctor/, need
# the cuda component as well. dl: NVML is loaded at run time (dlopen is in libc only from glibc
# 2.34).
gpufeed_component(doctor gpufeed ${CMAKE_DL_LIBS})

# --- pack: gpufeed/pack/ with the HDF5 writer (pack_hdf5: needs only hdf5), the LMDB writer
# (pack_lmdb: needs only lmdb, and zlib for checksums), or every writer this build has (pack).
# The defines choose the writers pack/pack.hpp compiles (see "Formats" there).
if(TARGET gpufeed_hdf5)
  gpufeed_component(pack_hdf5 gpufeed_hdf5)
  target_compile_definitions(gpufeed_pack_hdf5 INTERFACE GPUFEED_PACK_HDF5)
endif()
if(NOT ZLIB_FOUND)
  find_package(ZLIB QUIET)
endif()
if(TARGET gpufeed_lmdb AND ZLIB_FOUND)
  gpufeed_component(pack_lmdb gpufeed_lmdb ZLIB::ZLIB)
  target_compile_definitions(gpufeed_pack_lmdb INTERFACE GPUFEED_PACK_LMDB)
endif()
if(TARGET gpufeed_pack_hdf5 OR TARGET gpufeed_pack_lmdb)
  set(_gpufeed_writers "")
  foreach(f hdf5 lmdb)
    if(TARGET gpufeed_pack_${f})
      list(APPEND _gpufeed_writers gpufeed_pack_${f})
    endif()
  endforeach()
  gpufeed_component(pack ${_gpufeed_writers})
endif()

# --- remote: gpufeed/detail/remote/ (shards over HTTP(S) and S3: ranged GETs through libcurl;
# URLs, AWS Signature Version 4 and credentials, whose hashes OpenSSL's libcrypto computes).
# zlib's CRC-32 checksums the blocks of the node-local cache (local_cache_block.hpp).
find_package(CURL QUIET)
find_package(OpenSSL QUIET COMPONENTS Crypto)
if(NOT ZLIB_FOUND)
  find_package(ZLIB QUIET)
endif()
if(CURL_FOUND AND TARGET OpenSSL::Crypto AND ZLIB_FOUND)
  gpufeed_component(remote gpufeed CURL::libcurl OpenSSL::Crypto ZLIB::ZLIB)
  # Tells the sources' headers (detail/hdf5/url_reader.hpp) that shards may be URLs.
  target_compile_definitions(gpufeed_remote INTERFACE GPUFEED_HAS_REMOTE)
else()
  message(STATUS "gpufeed: libcurl, OpenSSL's libcrypto or zlib not found (apt install "
                 "libcurl4-openssl-dev libssl-dev zlib1g-dev); the remote component is not built")
endif()

# --- all: every component this build has.
add_library(gpufeed_all INTERFACE)
add_library(gpufeed::all ALIAS gpufeed_all)
set_target_properties(gpufeed_all PROPERTIES EXPORT_NAME all)
target_link_libraries(gpufeed_all INTERFACE gpufeed)
foreach(c IN LISTS GPUFEED_COMPONENTS)
  target_link_libraries(gpufeed_all INTERFACE gpufeed_${c})
endforeach()
