# `cmake --install BUILD --prefix P`: the public headers, libwpk (static, and shared with
# WPK_BUILD_SHARED), the `wpk` tool, the CMake package (find_package(wpk): wpk::wpk) and wpk.pc
# for pkg-config. Both describe the prefix relative to themselves, so the tree can move.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(WPK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/wpk)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/wpk DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ${WPK_INSTALLED_LIBRARIES} EXPORT wpkTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT wpkTargets NAMESPACE wpk:: DESTINATION ${WPK_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/wpkConfig.cmake.in
  ${PROJECT_BINARY_DIR}/wpkConfig.cmake INSTALL_DESTINATION ${WPK_CMAKE_DIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/wpkConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/wpkConfig.cmake ${PROJECT_BINARY_DIR}/wpkConfigVersion.cmake
  DESTINATION ${WPK_CMAKE_DIR})
# The static library's system dependencies, found again by the package (the same glue the build uses).
install(FILES ${PROJECT_SOURCE_DIR}/third_party/dependencies.cmake DESTINATION ${WPK_CMAKE_DIR}
  RENAME wpkDependencies.cmake)

set(WPK_PC_ONEDNN "")
if(WPK_WITH_ONEDNN)
  set(WPK_PC_ONEDNN "-ldnnl")
endif()
file(RELATIVE_PATH WPK_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/wpk.pc.in ${PROJECT_BINARY_DIR}/wpk.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/wpk.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/wpk)
