# Install layout, CMake package config, pkg-config file and the CPack .debs.
#
# Two packages, split as Debian splits a tool with a library (packaging/README.md):
#   mcpwarden (component runtime): what a user runs
#     bin/mcpwarden                         the CLI
#     libexec/mcpwarden/mcpwarden-fixture   the fixture server (drills, demo, bench, examples)
#     lib/libmcpwarden.so.<ABI>{,.*}        the shared library, for programs linked to it
#     share/man/man1/mcpwarden.1.gz, bash/zsh/fish completions, lib/systemd/user/*.{service,timer}
#   libmcpwarden-dev (component dev): what a program that links mcpwarden is built with
#     include/mcpwarden/*.h{,pp}            the public API and the C ABI
#     lib/libmcpwarden.so, lib/libmcpwarden.a
#     lib/cmake/mcpwarden/                  find_package(mcpwarden) → mcpwarden::mcpwarden
#     lib/pkgconfig/mcpwarden.pc
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS mcpwarden RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(TARGETS mcpwarden-fixture RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/mcpwarden
        COMPONENT runtime)
install(TARGETS mcpwarden_shared EXPORT mcpwardenTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_SKIP COMPONENT runtime)
install(TARGETS mcpwarden_shared
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_ONLY COMPONENT dev)
install(FILES ${CMAKE_BINARY_DIR}/lib/libmcpwarden.a DESTINATION ${CMAKE_INSTALL_LIBDIR}
        COMPONENT dev)
# Installed without its debug info, as Debian ships static libraries (half its size).
install(CODE "execute_process(COMMAND ${CMAKE_STRIP} --strip-debug --remove-section=.comment
  --enable-deterministic-archives
  \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libmcpwarden.a\")"
  COMPONENT dev)
file(GLOB mcpw_public_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/mcpwarden/*.h
     ${CMAKE_SOURCE_DIR}/include/mcpwarden/*.hpp)
install(FILES ${mcpw_public_headers} ${CMAKE_BINARY_DIR}/include/mcpwarden/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mcpwarden COMPONENT dev)

set(MCPW_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mcpwarden)
install(EXPORT mcpwardenTargets NAMESPACE mcpwarden:: DESTINATION ${MCPW_CMAKE_DIR}
        COMPONENT dev)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/mcpwardenConfig.cmake.in
  ${CMAKE_BINARY_DIR}/mcpwardenConfig.cmake INSTALL_DESTINATION ${MCPW_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/mcpwardenConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/mcpwardenConfig.cmake
              ${CMAKE_BINARY_DIR}/mcpwardenConfigVersion.cmake DESTINATION ${MCPW_CMAKE_DIR}
        COMPONENT dev)

# The prefix is relative to the .pc file, so the same file works under any --prefix.
file(RELATIVE_PATH MCPW_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${CMAKE_SOURCE_DIR}/cmake/mcpwarden.pc.in ${CMAKE_BINARY_DIR}/mcpwarden.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/mcpwarden.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)

# The man page as Debian ships one: compressed, deterministically (gzip -n: no name or time).
set(mcpw_man_gz ${CMAKE_BINARY_DIR}/packaging/mcpwarden.1.gz)
add_custom_command(OUTPUT ${mcpw_man_gz}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/packaging
  COMMAND gzip -9nc ${CMAKE_SOURCE_DIR}/packaging/man/mcpwarden.1 > ${mcpw_man_gz}
  DEPENDS ${CMAKE_SOURCE_DIR}/packaging/man/mcpwarden.1 VERBATIM)
add_custom_target(mcpwarden_man ALL DEPENDS ${mcpw_man_gz})
install(FILES ${mcpw_man_gz} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runtime)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/completions/mcpwarden.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME mcpwarden
        COMPONENT runtime)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/completions/_mcpwarden
        DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions COMPONENT runtime)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/completions/mcpwarden.fish
        DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d COMPONENT runtime)
file(GLOB mcpw_units ${CMAKE_SOURCE_DIR}/packaging/systemd/*.service
                     ${CMAKE_SOURCE_DIR}/packaging/systemd/*.timer
                     ${CMAKE_SOURCE_DIR}/packaging/systemd/*.socket)
# lib/systemd/user, not ${LIBDIR}: systemd looks there whatever the multiarch libdir is.
install(FILES ${mcpw_units} DESTINATION lib/systemd/user COMPONENT runtime)

# Each package's /usr/share/doc/PACKAGE: the copyright file and the changelog (gzip -9n) and,
# for the runtime package, the lintian overrides that packaging/README.md explains.
string(TIMESTAMP MCPW_CHANGELOG_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
foreach(pkg_component mcpwarden:runtime libmcpwarden-dev:dev)
  string(REPLACE ":" ";" pc ${pkg_component})
  list(GET pc 0 pkg)
  list(GET pc 1 component)
  set(MCPW_DEB_PACKAGE ${pkg})
  configure_file(${CMAKE_SOURCE_DIR}/packaging/debian/changelog.in
                 ${CMAKE_BINARY_DIR}/packaging/${pkg}/changelog @ONLY)
  execute_process(COMMAND gzip -9nf ${CMAKE_BINARY_DIR}/packaging/${pkg}/changelog)
  install(FILES ${CMAKE_SOURCE_DIR}/packaging/debian/copyright
                ${CMAKE_BINARY_DIR}/packaging/${pkg}/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${pkg} COMPONENT ${component}
          EXCLUDE_FROM_ALL)
  if(EXISTS ${CMAKE_SOURCE_DIR}/packaging/debian/${pkg}.lintian-overrides)
    install(FILES ${CMAKE_SOURCE_DIR}/packaging/debian/${pkg}.lintian-overrides
            DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides RENAME ${pkg}
            COMPONENT ${component} EXCLUDE_FROM_ALL)
  endif()
endforeach()

# ---- CPack: `cpack -G DEB` in the build directory makes both packages ----------------------
set(CPACK_PACKAGE_NAME mcpwarden)
set(CPACK_PACKAGE_VENDOR "mcpwarden")
set(CPACK_PACKAGE_CONTACT "mcpwarden maintainers <maintainers@mcpwarden.invalid>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Stripped, as Debian ships binaries (debug info belongs in a -dbgsym package): the
# RelWithDebInfo CLI is 28 MB with its DWARF.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Our own libmcpwarden.so is in the runtime package; shlibdeps must find it in the build tree.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/lib)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# What shlibdeps cannot see: the exporter opens libcurl by dlopen (src/export/libcurl.hpp).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "libcurl4 (>= 7.62)")
# The shared library's cache: dpkg's ldconfig trigger, as Debian does it (CPack also writes a
# postinst and postrm that call ldconfig; packaging/README.md).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/packaging/debian/triggers)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME mcpwarden)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "supervisor for MCP stdio servers: nothing survives its session\n\
mcpwarden launches MCP stdio servers inside a containment (subreaper, session\n\
cgroup, pidfds, optional PID namespace and sandbox) and tears their whole\n\
process tree down when the client goes away, with a hash-chained journal of\n\
every tool call and signal. This package holds the command, the shared\n\
library libmcpwarden, the man page, shell completions and systemd user units.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libmcpwarden-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The headers and the link-time files of the library the runtime package holds; the static
# archive needs the development packages of what it links (mcpwarden.pc, Libs.private).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "mcpwarden (= ${PROJECT_VERSION}), libfmt-dev, libsimdjson-dev, libsqlite3-dev, \
libssl-dev, zlib1g-dev, libtomlplusplus-dev, libseccomp-dev, libre2-dev, libsystemd-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF)
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "development files for libmcpwarden\n\
libmcpwarden is the library behind mcpwarden, the supervisor for MCP stdio\n\
servers: its C++ API and C ABI spawn a server contained, tear its tree down\n\
and read the journal. This package holds the headers, the static library,\n\
the pkg-config file and the CMake package configuration.")
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
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/packaging/deb.sh ${CMAKE_BINARY_DIR}
            ${CMAKE_BINARY_DIR}/packaging-debs)
  set_tests_properties(packaging.man_renders_without_warnings packaging.completions_load
    packaging.install_and_example_hosts packaging.deb_contents
    PROPERTIES LABELS packaging TIMEOUT 180)
  # cpack, then lintian over both packages (a minute and more on two cores).
  set_tests_properties(packaging.deb_contents PROPERTIES TIMEOUT 420 FIXTURES_SETUP debs)
  # The installed package's demo, with server-everything through npx --offline.
  add_test(NAME packaging.demo_installed
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/packaging/demo.sh ${CMAKE_SOURCE_DIR}
            ${CMAKE_BINARY_DIR}/packaging-debs)
  set_tests_properties(packaging.demo_installed PROPERTIES LABELS "packaging;e2e" TIMEOUT 360
    FIXTURES_REQUIRED debs SKIP_RETURN_CODE 77)
endif()
