# Install rules: headers, one export set per component (so a consumer loads only what it asks
# for and its dependencies), the package config with version file, FindLMDB.cmake, FindNUMA.cmake,
# FindGpufeedCodecs.cmake and FindGpufeedImage.cmake with the helper they share.
set(GPUFEED_CMAKE_DIR ${CMAKE_INSTALL_DATADIR}/cmake/gpufeed)  # header-only: arch-independent

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/gpufeed DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(TARGETS gpufeed EXPORT gpufeedTargets)
install(EXPORT gpufeedTargets NAMESPACE gpufeed:: DESTINATION ${GPUFEED_CMAKE_DIR})
foreach(c IN LISTS GPUFEED_COMPONENTS ITEMS all)
  install(TARGETS gpufeed_${c} EXPORT gpufeed_${c}Targets)
  install(EXPORT gpufeed_${c}Targets NAMESPACE gpufeed:: DESTINATION ${GPUFEED_CMAKE_DIR})
endforeach()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gpufeedConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gpufeedConfig.cmake
  INSTALL_DESTINATION ${GPUFEED_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gpufeedConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES
  ${PROJECT_BINARY_DIR}/gpufeedConfig.cmake
  ${PROJECT_BINARY_DIR}/gpufeedConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindLMDB.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindNUMA.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindGpufeedCodecs.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindGpufeedImage.cmake
  ${PROJECT_SOURCE_DIR}/cmake/gpufeed_find_library.cmake
  DESTINATION ${GPUFEED_CMAKE_DIR})
