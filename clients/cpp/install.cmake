# `cmake --install`: the C++ client library (rwkvd_client with the rwkvd_protocol it needs, both
# static), its headers under include/rwkvd (as <clients/cpp/client.h>, the paths of this tree),
# find_package(rwkvd) -> rwkvd::client and pkg-config's rwkvd.pc. tools/ installs the binary.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(RWKVD_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/rwkvd)
set(RWKVD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/rwkvd)

install(TARGETS rwkvd_client rwkvd_protocol ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The client's header and the protocol headers it includes (the rest of protocol/ is private).
install(FILES ${CMAKE_CURRENT_LIST_DIR}/client.h
        DESTINATION ${RWKVD_INSTALL_INCLUDEDIR}/clients/cpp)
install(FILES ${PROJECT_SOURCE_DIR}/protocol/messages.h ${PROJECT_SOURCE_DIR}/protocol/codec.h
              ${PROJECT_SOURCE_DIR}/protocol/value.h
        DESTINATION ${RWKVD_INSTALL_INCLUDEDIR}/protocol)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/rwkvdConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/rwkvdConfig.cmake
                              INSTALL_DESTINATION ${RWKVD_INSTALL_CMAKEDIR}
                              PATH_VARS CMAKE_INSTALL_LIBDIR RWKVD_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/rwkvdConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/rwkvdConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/rwkvdConfigVersion.cmake
        DESTINATION ${RWKVD_INSTALL_CMAKEDIR})
# The .pc file finds its prefix from where it lies (${pcfiledir}), so the tree can move and
# `cmake --install --prefix P` works like the configured prefix.
file(RELATIVE_PATH RWKVD_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
configure_file(${CMAKE_CURRENT_LIST_DIR}/rwkvd.pc.in ${CMAKE_CURRENT_BINARY_DIR}/rwkvd.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/rwkvd.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
