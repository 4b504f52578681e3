# `cmake --install` and CPack (.deb). Three components:
#   server  raftlogd, raftlogctl, the systemd unit (its ExecStart pointed at the installed raftlogd),
#           example configuration (share/doc/raftlog/examples)
#   tools   raftlog-bench, raftlog-sim
#   dev     the C++ client library (static: raftlog_client with the raftlog_api_errors and raftlog_proto
#           it needs), its headers under include/raftlog, the public protos under
#           share/raftlog/proto, and a CMake package: find_package(raftlog) -> raftlog::client
# `cpack -G DEB` in the build directory makes raftlog_<version>_<arch>.deb (server + tools) and
# raftlog-dev_<version>_<arch>.deb; their Depends come from dpkg-shlibdeps. scripts/package-test.sh
# (ctest package_deb_test) builds and installs them into a scratch root.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS raftlogd raftlogctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
install(TARGETS raftlog-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
if(TARGET raftlog-sim)
  install(TARGETS raftlog-sim RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
endif()

# The unit in deploy/systemd names /usr/local/bin/raftlogd (a hand install); the installed copy names
# wherever this install puts raftlogd. Done at install time because CPack installs with its own prefix.
install(CODE "
  set(raftlog_unit_source \"${PROJECT_SOURCE_DIR}/deploy/systemd/raftlogd.service\")
  set(raftlog_unit_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\")
  file(READ \"\${raftlog_unit_source}\" raftlog_unit)
  string(REPLACE \"/usr/local/bin/raftlogd\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/raftlogd\"
         raftlog_unit \"\${raftlog_unit}\")
  file(MAKE_DIRECTORY \"\${raftlog_unit_dir}\")
  file(WRITE \"\${raftlog_unit_dir}/raftlogd.service\" \"\${raftlog_unit}\")
  message(STATUS \"Installing: \${raftlog_unit_dir}/raftlogd.service\")
" COMPONENT server)
install(FILES deploy/systemd/raftlogd.conf deploy/systemd/raftlogd.default
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT server)
install(FILES README.md docs/configuration.md docs/operations.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT server)

# The client library. Headers keep their in-tree paths under include/raftlog, so code written
# against the build tree (#include "client/client.h") compiles unchanged against the install.
set(raftlog_include_dir ${CMAKE_INSTALL_INCLUDEDIR}/raftlog)
install(TARGETS raftlog_client raftlog_api_errors raftlog_proto EXPORT raftlogTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        INCLUDES DESTINATION ${raftlog_include_dir})
install(FILES src/client/client.h src/client/producer.h src/client/admin.h DESTINATION ${raftlog_include_dir}/client COMPONENT dev)
install(FILES src/api_errors/error_details.h DESTINATION ${raftlog_include_dir}/api_errors COMPONENT dev)
install(FILES proto/raftlog/v1/client.proto proto/raftlog/v1/error_model.proto proto/raftlog/v1/admin.proto
        DESTINATION ${CMAKE_INSTALL_DATADIR}/raftlog/proto/raftlog/v1 COMPONENT dev)
set(raftlog_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/raftlog)
install(EXPORT raftlogTargets NAMESPACE raftlog:: DESTINATION ${raftlog_cmake_dir} COMPONENT dev)
configure_package_config_file(cmake/raftlogConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/raftlogConfig.cmake
                              INSTALL_DESTINATION ${raftlog_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/raftlogConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/raftlogConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/raftlogConfigVersion.cmake
        DESTINATION ${raftlog_cmake_dir} COMPONENT dev)

# ---- CPack: Debian packages ----
set(CPACK_PACKAGE_NAME raftlog)
set(CPACK_PACKAGE_VENDOR "raftlog")
set(CPACK_PACKAGE_CONTACT "raftlog maintainers <raftlog@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Raft-replicated, durable, append-only log service")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
# Debug sections stay in the build tree: stripped binaries make the package 4x smaller and faster to build.
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_COMPONENT_SERVER_GROUP raftlog)
set(CPACK_COMPONENT_TOOLS_GROUP raftlog)
set(CPACK_COMPONENT_DEV_GROUP dev)
set(CPACK_DEBIAN_RAFTLOG_PACKAGE_NAME raftlog)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME raftlog-dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION database)
set(CPACK_DEBIAN_RAFTLOG_PACKAGE_SECTION database)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_RAFTLOG_DESCRIPTION
    "Raft-replicated, durable, append-only log service\n raftlogd (a cluster node, with a systemd unit), raftlogctl (the operator tool),\n raftlog-bench and raftlog-sim.")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "raftlog C++ client library, headers and protos\n A static client library with leader discovery, redirects and idempotent retries,\n the raftlog.v1 protos, and a CMake package (find_package(raftlog)).")
# Depends of the binaries' package from the libraries they load; the static library's users need
# the -dev packages it is compiled against.
set(CPACK_DEBIAN_RAFTLOG_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libgrpc++-dev, libprotobuf-dev")
set(CPACK_DEBIAN_RAFTLOG_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/deploy/debian/postinst)
set(CPACK_DEBIAN_RAFTLOG_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
