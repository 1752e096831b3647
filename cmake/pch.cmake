# Precompiled headers: nlohmann/json, fmt, GoogleTest and the standard headers are parsed
# once per build instead of once per file (cmake/pch/*.hpp). Two headers because the two
# families of targets differ in flags a PCH must match: the layers are position
# independent (they go into libmcpwarden.so), the test and tool executables are not.
# -Winvalid-pch (an error under -Werror) makes a PCH that GCC would silently ignore fail
# the build instead. Off for the clang fuzz build, whose layers carry extra instrumentation
# flags the shared PCH would not match.
option(WARDEN_PCH "Precompile the third-party headers most files include" ON)
if(WARDEN_FUZZ)
  set(WARDEN_PCH OFF)
endif()

if(WARDEN_PCH)
  add_compile_options(-Winvalid-pch)
  file(WRITE ${CMAKE_BINARY_DIR}/pch_anchor.cpp "// the translation unit a PCH is built with\n")

  add_library(warden_pch_layers OBJECT ${CMAKE_BINARY_DIR}/pch_anchor.cpp)
  set_property(TARGET warden_pch_layers PROPERTY POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(warden_pch_layers PRIVATE fmt::fmt nlohmann_json::nlohmann_json)
  target_precompile_headers(warden_pch_layers PRIVATE ${CMAKE_SOURCE_DIR}/cmake/pch/layers.hpp)

  add_library(warden_pch_exe OBJECT ${CMAKE_BINARY_DIR}/pch_anchor.cpp)
  target_link_libraries(warden_pch_exe PRIVATE fmt::fmt nlohmann_json::nlohmann_json)
  target_precompile_headers(warden_pch_exe PRIVATE ${CMAKE_SOURCE_DIR}/cmake/pch/layers.hpp)
endif()

# warden_use_pch(TARGET layers|exe|tests): force-include the matching precompiled header.
function(warden_use_pch target kind)
  if(NOT WARDEN_PCH)
    return()
  endif()
  if(kind STREQUAL "tests")
    if(NOT TARGET warden_pch_tests)
      add_library(warden_pch_tests OBJECT ${CMAKE_BINARY_DIR}/pch_anchor.cpp)
      target_link_libraries(warden_pch_tests PRIVATE fmt::fmt nlohmann_json::nlohmann_json
                            GTest::gtest GTest::gmock)
      target_precompile_headers(warden_pch_tests PRIVATE ${CMAKE_SOURCE_DIR}/cmake/pch/tests.hpp)
      if(WARDEN_TEST_CODE_O0)  # a PCH must be built at the level of the files that use it
        target_compile_options(warden_pch_tests PRIVATE -O0)
      endif()
    endif()
    target_precompile_headers(${target} REUSE_FROM warden_pch_tests)
  else()
    target_precompile_headers(${target} REUSE_FROM warden_pch_${kind})
  endif()
endfunction()
