# libFuzzer targets (fuzz/<name>_fuzz.cpp), active only with -DWARDEN_FUZZ=ON and clang.
#
# Each target links only the layer library it exercises, so `cmake --build B --target
# fuzz_all` compiles sys, proc, rpc and clients and nothing above them. Those
# libraries get coverage instrumentation (-fsanitize=fuzzer-no-link) plus ASan and UBSan;
# the fuzz binaries get -fsanitize=fuzzer. Each target is a ctest test labelled `fuzz`
# that runs for WARDEN_FUZZ_SECONDS on its committed seed corpus (fuzz/corpus/<name>/);
# new inputs go to a scratch corpus in the build tree, never into the source tree.
option(WARDEN_FUZZ "Build the libFuzzer targets (clang only)" OFF)
set(WARDEN_FUZZ_SECONDS 15 CACHE STRING "Seconds each fuzz target runs under ctest")
set(WARDEN_FUZZ_RUNS 5000000 CACHE STRING "Upper bound on inputs each fuzz target runs under ctest")

if(WARDEN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(WARNING "WARDEN_FUZZ needs clang (libFuzzer); fuzz targets are not built")
    return()
  endif()
  set(fuzz_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined
                 -fno-omit-frame-pointer)
  foreach(lib sys proc rpc clients)
    target_compile_options(warden_${lib} PRIVATE -fsanitize=fuzzer-no-link ${fuzz_flags})
  endforeach()

  # target name -> the one layer library it links (with what that layer stands on)
  set(fuzz_layer_framer rpc)
  set(fuzz_layer_message rpc)
  set(fuzz_layer_proc_stat proc)
  set(fuzz_layer_proc_net proc)
  set(fuzz_layer_jsonc clients)
  set(fuzz_layer_toml_scan clients)
  set(fuzz_layer_wrap clients)
  set(fuzz_layer_pattern sys)
  # The journal's canonical JSON stands on sys alone: its one source file is compiled into
  # its target, which spares the fuzz build the journal layer and what that stands on
  # (contain, sandbox): 140 of the build's 171 CPU-seconds.
  set(fuzz_layer_canonical_json sys)
  set(fuzz_sources_canonical_json ${CMAKE_SOURCE_DIR}/src/journal/canonical_json.cpp)
  set(fuzz_libs_canonical_json simdjson::simdjson)  # canonical_of reads simdjson's values

  add_custom_target(fuzz_all)
  file(GLOB fuzz_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fuzz/*_fuzz.cpp)
  foreach(src ${fuzz_srcs})
    get_filename_component(fname ${src} NAME_WE)
    string(REGEX REPLACE "_fuzz$" "" name ${fname})
    if(NOT DEFINED fuzz_layer_${name})
      message(FATAL_ERROR "fuzz/${fname}.cpp: add fuzz_layer_${name} to cmake/fuzz.cmake")
    endif()
    add_executable(fuzz_${name} EXCLUDE_FROM_ALL ${src} ${fuzz_sources_${name}})
    target_compile_options(fuzz_${name} PRIVATE -fsanitize=fuzzer ${fuzz_flags})
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer ${fuzz_flags})
    target_link_libraries(fuzz_${name} PRIVATE warden_${fuzz_layer_${name}} ${fuzz_libs_${name}})
    add_dependencies(fuzz_all fuzz_${name})
    if(WARDEN_TESTS)
      set(scratch ${CMAKE_BINARY_DIR}/fuzz-corpus/${name})
      file(MAKE_DIRECTORY ${scratch})
      add_test(NAME fuzz_${name}
               COMMAND fuzz_${name} -max_total_time=${WARDEN_FUZZ_SECONDS}
                       -runs=${WARDEN_FUZZ_RUNS} -timeout=10 -rss_limit_mb=2048
                       -print_final_stats=1 ${scratch} ${CMAKE_SOURCE_DIR}/fuzz/corpus/${name})
      math(EXPR fuzz_timeout "${WARDEN_FUZZ_SECONDS} + 120")
      set_tests_properties(fuzz_${name} PROPERTIES LABELS fuzz TIMEOUT ${fuzz_timeout})
    endif()
  endforeach()
endif()
