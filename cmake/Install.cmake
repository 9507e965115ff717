include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS mpk EXPORT mpkTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mpk)
install(EXPORT mpkTargets NAMESPACE mpk:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mpk)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mpkConfig.cmake.in
  ${PROJECT_BINARY_DIR}/mpkConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mpk)
# Minor versions only add to the C API (config structs grow behind struct_size), so a consumer
# asking for 0.1 can use 0.2; the library's soname (libmpk.so.0) follows the major version.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mpkConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mpkConfig.cmake ${PROJECT_BINARY_DIR}/mpkConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mpk)
if(MPK_BUILD_TOOLS)
  install(TARGETS mpk-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET mpk-tune)
  install(TARGETS mpk-tune RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
