# Settings for gpufeed's own programs (tests, examples, benchmarks) — never applied to the
# INTERFACE targets users link.

# -Wno-restrict: g++ 12 at -O2/-O3 reports `"literal" + std::string&&` as an overlapping memcpy
# (GCC bug 105651, a false positive fixed in g++ 13).
# -Wno-missing-field-initializers: g++ 12 warns on designated initialisers that leave members to
# their default member initialisers, which is how gpufeed's option structs are meant to be used.

# nvcc for the .cu programs that use the .cuh transforms. sm_90 = H200/H100.
if(TARGET gpufeed_cuda)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 flag; teach it after the language is enabled (before,
    # the compiler-ABI try-compile would ask for a dialect it cannot name).
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    # The shared runtime, as gpufeed::cuda links it (CUDA::cudart): one runtime per process, and
    # tests can interpose its entry points to count synchronisations.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(GPUFEED_HAS_NVCC ON)
  endif()
endif()

add_library(gpufeed_program_options INTERFACE)
target_compile_options(gpufeed_program_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                                 -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>
  $<$<AND:$<BOOL:${GPUFEED_WERROR}>,$<COMPILE_LANGUAGE:CXX>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall -Xcompiler=-Wno-restrict>)
if(GPUFEED_SANITIZE)
  target_compile_options(gpufeed_program_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${GPUFEED_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all>
    # GCC 12's -Wmaybe-uninitialized reports false positives inside libstdc++ (std::regex,
    # std::optional<std::string> assignment) once sanitizer instrumentation changes inlining;
    # the sanitizers themselves check real uninitialised reads. Warned, not fatal, here only.
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-error=maybe-uninitialized>)
  if(GPUFEED_SANITIZE_EXCLUDE)
    target_compile_options(gpufeed_program_options INTERFACE
      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize=${GPUFEED_SANITIZE_EXCLUDE}>)
  endif()
  target_link_options(gpufeed_program_options INTERFACE -fsanitize=${GPUFEED_SANITIZE})
endif()

# gpufeed_program(<target>): apply the options above.
function(gpufeed_program target)
  target_link_libraries(${target} PRIVATE gpufeed_program_options)
endfunction()
