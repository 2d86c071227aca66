# Compiler flags and small helpers shared by every target.
# tkv_library(NAME SOURCES ... DEPS ...) makes one layer target;
# tkv_test(NAME SOURCES ... DEPS ... LABELS ...) one ctest entry.
include(${CMAKE_CURRENT_LIST_DIR}/TkvLayers.cmake)
add_library(tkv_flags INTERFACE)
target_compile_options(tkv_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${TKV_WERROR}>>:-Werror>)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  target_compile_options(tkv_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=${TKV_MARCH}>)
endif()
# GCC in ISO mode (-std=c++20) does not contract a*b+c into an FMA; clang 14 does by
# default. Off for both, so kernels that promise bit-equal prefill and decode keep it.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  target_compile_options(tkv_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>)
endif()
if(TKV_SANITIZE)
  target_compile_options(tkv_flags INTERFACE -fsanitize=${TKV_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(tkv_flags INTERFACE -fsanitize=${TKV_SANITIZE})
endif()
# libFuzzer: every library gets coverage instrumentation; the fuzz targets
# (tests/fuzz) link the fuzzer runtime and its main.
if(TKV_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TKV_FUZZ needs clang (libFuzzer): use the cpu-asan or fuzz preset")
  endif()
  target_compile_options(tkv_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
endif()
if(TKV_CUDA)
  target_compile_definitions(tkv_flags INTERFACE TKV_WITH_CUDA=1)
endif()

# The layer is the folder that calls tkv_library (src/<layer>); its include
# paths come from tkv_layer_includes (TkvLayers.cmake).
function(tkv_library name)
  cmake_parse_arguments(A "INTERFACE" "" "SOURCES;DEPS" ${ARGN})
  get_filename_component(layer ${CMAKE_CURRENT_SOURCE_DIR} NAME)
  if(A_INTERFACE OR NOT A_SOURCES)
    add_library(${name} INTERFACE)
    target_link_libraries(${name} INTERFACE tkv_flags ${A_DEPS})
  else()
    add_library(${name} STATIC ${A_SOURCES})
    target_link_libraries(${name} PUBLIC tkv_flags ${A_DEPS})
  endif()
  tkv_layer_includes(${name} ${layer})
endfunction()

function(tkv_test name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE TKV_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}" TIMEOUT 900)
endfunction()
