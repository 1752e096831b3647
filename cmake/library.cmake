# libmcpwarden: the public C++ API and the C ABI (include/mcpwarden/), as a shared library
# (SONAME libmcpwarden.so.<ABI>, only the MCPW_API symbols exported) and a self-contained
# static archive (every layer folded in). See docs/LIBRARY.md.

# The install library directory is Debian's multiarch one where the compiler has one
# (lib/x86_64-linux-gnu): where the packages install to, whatever the build's own prefix, so
# that the arch-dependent pkg-config file and CMake config are found by cross builds too.
if(CMAKE_LIBRARY_ARCHITECTURE AND NOT DEFINED CACHE{CMAKE_INSTALL_LIBDIR})
  set(CMAKE_INSTALL_LIBDIR lib/${CMAKE_LIBRARY_ARCHITECTURE} CACHE PATH "Object code libraries")
endif()
include(GNUInstallDirs)
set(MCPW_ABI_VERSION 0)

# Everything that goes into the shared library must be position independent, including
# the layers' static archives defined above.
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
foreach(layer fault sys proc sandbox contain rpc journal record shim clients inventory reap drill share export)
  get_target_property(ltype warden_${layer} TYPE)
  if(ltype STREQUAL "STATIC_LIBRARY")
    set_property(TARGET warden_${layer} PROPERTY POSITION_INDEPENDENT_CODE ON)
  endif()
endforeach()

configure_file(${CMAKE_SOURCE_DIR}/cmake/version.h.in
               ${CMAKE_BINARY_DIR}/include/mcpwarden/version.h @ONLY)

# Every layer: the CLI is built on this API alone (src/cli includes only include/mcpwarden/).
set(MCPW_API_DEPS warden_export warden_share warden_drill warden_reap warden_inventory warden_shim warden_record warden_journal
    warden_contain warden_sandbox warden_clients warden_rpc warden_proc warden_sys warden_fault)

file(GLOB api_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/api/*.cpp)
add_library(warden_api OBJECT ${api_srcs})
target_include_directories(warden_api PUBLIC
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/include>
  PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(warden_api PRIVATE ${MCPW_API_DEPS} nlohmann_json::nlohmann_json)
target_compile_definitions(warden_api PRIVATE MCPW_BUILDING=1
  $<$<BOOL:${WARDEN_SANITIZE}>:WARDEN_SANITIZED=1>)
set_target_properties(warden_api PROPERTIES C_VISIBILITY_PRESET hidden
  CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)

# Shared: the layers' archives are linked in with their symbols hidden (--exclude-libs),
# so only MCPW_API is exported; third-party libraries stay shared dependencies.
add_library(mcpwarden_shared SHARED $<TARGET_OBJECTS:warden_api>)
target_link_libraries(mcpwarden_shared PRIVATE ${MCPW_API_DEPS})
target_link_options(mcpwarden_shared PRIVATE -Wl,--exclude-libs,ALL)
# Every symbol resolved at link time, so that a missing dependency fails here and not in a
# user's program. Clang leaves a sanitizer's runtime to the executable that loads the
# library (GCC links it in), so its sanitizer tree cannot ask for that.
if(NOT (WARDEN_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang"))
  target_link_options(mcpwarden_shared PRIVATE -Wl,--no-undefined)
endif()
target_include_directories(mcpwarden_shared PUBLIC
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(mcpwarden_shared PROPERTIES OUTPUT_NAME mcpwarden
  VERSION ${PROJECT_VERSION} SOVERSION ${MCPW_ABI_VERSION} EXPORT_NAME mcpwarden
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
add_library(mcpwarden::mcpwarden ALIAS mcpwarden_shared)

# Static: one archive with the API objects and every layer it needs, merged with an ar MRI
# script, so `-lmcpwarden` (+ the third-party libraries in mcpwarden.pc) is all a host needs.
set(mcpw_static ${CMAKE_BINARY_DIR}/lib/libmcpwarden.a)
set(mri "CREATE ${mcpw_static}\n")
foreach(dep ${MCPW_API_DEPS})
  string(APPEND mri "ADDLIB $<TARGET_FILE:${dep}>\n")
endforeach()
string(APPEND mri "ADDMOD $<JOIN:$<TARGET_OBJECTS:warden_api>,\nADDMOD >\nSAVE\nEND\n")
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/libmcpwarden.mri CONTENT "${mri}")
add_custom_command(OUTPUT ${mcpw_static}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/lib
  COMMAND ${CMAKE_COMMAND} -E remove -f ${mcpw_static}
  COMMAND ${CMAKE_AR} -M < ${CMAKE_BINARY_DIR}/libmcpwarden.mri
  DEPENDS ${MCPW_API_DEPS} warden_api ${CMAKE_BINARY_DIR}/libmcpwarden.mri
  COMMENT "Merging libmcpwarden.a" VERBATIM)
add_custom_target(mcpwarden_static ALL DEPENDS ${mcpw_static})

# Third-party libraries a static link needs (mcpwarden.pc Libs.private, the CMake config).
set(MCPW_STATIC_LIBS "-lfmt -lsimdjson -lsqlite3 -lz -lssl -lcrypto -ltomlplusplus -lseccomp -lre2")
if(SYSTEMD_FOUND)
  string(APPEND MCPW_STATIC_LIBS " -lsystemd")
endif()
string(APPEND MCPW_STATIC_LIBS " -lpthread")
string(REPLACE " " ";" MCPW_STATIC_LIBS_CMAKE "${MCPW_STATIC_LIBS}")

if(WARDEN_TESTS)
  file(GLOB api_tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/api/*_test.cpp)
  if(api_tests)
    add_executable(test_api ${api_tests})
    target_link_libraries(test_api PRIVATE mcpwarden_shared warden_testing GTest::gtest_main)
    add_dependencies(test_api mcpwarden-fixture)
    gtest_discover_tests(test_api DISCOVERY_MODE PRE_TEST PROPERTIES TIMEOUT 120 LABELS api)
  endif()
endif()

# The CLI is built on the same API and nothing else of ours: warden_api's objects, its public
# include directories (include/, the generated version.h), and the layers it links privately
# as link-only dependencies (no src/ include path; CMakeLists.txt).
target_link_libraries(mcpwarden PRIVATE warden_api)
