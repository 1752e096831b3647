# Install layout, CMake package config, pkg-config file and the CPack .deb.
#
#   bin/mcpwarden                         the CLI
#   libexec/mcpwarden/mcpwarden-fixture   the fixture server (drills, demo, bench, examples)
#   lib/libmcpwarden.so.* / .a            the library
#   include/mcpwarden/*.h{,pp}            the public API and the C ABI
#   lib/cmake/mcpwarden/                  find_package(mcpwarden) → mcpwarden::mcpwarden
#   lib/pkgconfig/mcpwarden.pc
#   share/man/man1/mcpwarden.1, bash/zsh/fish completions, lib/systemd/user/*.{service,timer}
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS mcpwarden RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS mcpwarden-fixture RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/mcpwarden)
install(TARGETS mcpwarden_shared EXPORT mcpwardenTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_SKIP)
install(TARGETS mcpwarden_shared
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_ONLY)
install(FILES ${CMAKE_BINARY_DIR}/lib/libmcpwarden.a DESTINATION ${CMAKE_INSTALL_LIBDIR})
file(GLOB mcpw_public_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/mcpwarden/*.h
     ${CMAKE_SOURCE_DIR}/include/mcpwarden/*.hpp)
install(FILES ${mcpw_public_headers} ${CMAKE_BINARY_DIR}/include/mcpwarden/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mcpwarden)

set(MCPW_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mcpwarden)
install(EXPORT mcpwardenTargets NAMESPACE mcpwarden:: DESTINATION ${MCPW_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/mcpwardenConfig.cmake.in
  ${CMAKE_BINARY_DIR}/mcpwardenConfig.cmake INSTALL_DESTINATION ${MCPW_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/mcpwardenConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/mcpwardenConfig.cmake
              ${CMAKE_BINARY_DIR}/mcpwardenConfigVersion.cmake DESTINATION ${MCPW_CMAKE_DIR})

# The prefix is relative to the .pc file, so the same file works under any --prefix.
file(RELATIVE_PATH MCPW_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${CMAKE_SOURCE_DIR}/cmake/mcpwarden.pc.in ${CMAKE_BINARY_DIR}/mcpwarden.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/mcpwarden.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES ${CMAKE_SOURCE_DIR}/packaging/man/mcpwarden.1
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/completions/mcpwarden.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME mcpwarden)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/completions/_mcpwarden
        DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/completions/mcpwarden.fish
        DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d)
file(GLOB mcpw_units ${CMAKE_SOURCE_DIR}/packaging/systemd/*.service
                     ${CMAKE_SOURCE_DIR}/packaging/systemd/*.timer
                     ${CMAKE_SOURCE_DIR}/packaging/systemd/*.socket)
# lib/systemd/user, not ${LIBDIR}: systemd looks there whatever the multiarch libdir is.
install(FILES ${mcpw_units} DESTINATION lib/systemd/user)

# ---- CPack: `cpack -G DEB` in the build directory ----------------------------------------
set(CPACK_PACKAGE_NAME mcpwarden)
set(CPACK_PACKAGE_VENDOR "mcpwarden")
set(CPACK_PACKAGE_CONTACT "mcpwarden maintainers <mcpwarden@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "supervisor for MCP stdio servers: nothing survives its session")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Stripped, as Debian ships binaries (debug info belongs in a -dbgsym package): the
# RelWithDebInfo CLI is 28 MB with its DWARF, and packing it took cpack ~3 min on 2 cores.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Our own libmcpwarden.so is in the package; shlibdeps must find it in the staging tree.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/lib)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "mcpwarden launches MCP stdio servers inside a containment (subreaper, session cgroup,\n\
 pidfds, optional PID namespace) and tears their whole process tree down when the client\n\
 goes away, with a hash-chained journal of every tool call and signal. Includes\n\
 libmcpwarden (C++ API and C ABI), its headers, the man page, shell completions and\n\
 systemd user units.")
include(CPack)

# ---- Packaging tests (ctest -L packaging) ------------------------------------------------
if(WARDEN_TESTS)
  add_test(NAME packaging.man_renders_without_warnings
    COMMAND sh -c "out=$(MANWIDTH=80 man --warnings -l '${CMAKE_SOURCE_DIR}/packaging/man/mcpwarden.1' 2>&1 >/dev/null); [ -z \"$out\" ] || { echo \"$out\"; exit 1; }")
  add_test(NAME packaging.completions_load
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/packaging/completions.sh ${CMAKE_SOURCE_DIR} $<TARGET_FILE:mcpwarden>)
  add_test(NAME packaging.install_and_example_hosts
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/packaging/install_examples.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
  add_test(NAME packaging.deb_contents
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/packaging/deb.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(packaging.man_renders_without_warnings packaging.completions_load
    packaging.install_and_example_hosts packaging.deb_contents
    PROPERTIES LABELS packaging TIMEOUT 180)
endif()
