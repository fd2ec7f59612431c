# Profile-guided optimization of cumem-analyze (GCC): an instrumented copy of the analyzer is built in a build tree of
# its own, reads the example traces (analyzer/profile_training.sh), and the analyzer of this build is compiled with
# the counts that run left: which branches are taken, which calls are hot, where to inline (the gain is measured in
# docs/performance.md, "Reading a trace").
#
# The instrumented tree is rebuilt (incrementally) and the examples read again whenever an analyzer source changes,
# and then every analyzer object is compiled again with the new counts: a change to one file costs two analyzer
# builds. -DCUMEMTRACE_ANALYZER_PGO=OFF skips all of it (a faster edit-build loop, a slower analyzer). Included from
# analyzer/CMakeLists.txt once cumemtrace_analyzer_lib and cumem-analyze exist.
option(CUMEMTRACE_ANALYZER_PGO
       "Optimize cumem-analyze with a profile of it reading examples/ (GCC; doubles its build)" ON)
# Set only in the instrumented tree: where its counters go.
set(CUMEMTRACE_ANALYZER_PROFILE_GENERATE "" CACHE PATH "internal: the instrumented build's profile directory")

if(NOT CUMEMTRACE_ANALYZER_WHOLE_PROGRAM OR CMAKE_CXX_COMPILER_VERSION VERSION_LESS 11)
  return()  # GCC 11 or newer, with the whole-program build: -fprofile-prefix-path and LTO's use of the counts
endif()

# Counter files are named after the objects' paths; with the build tree's own path taken off, the instrumented tree
# and this one name them alike.
set(_prefix -fprofile-prefix-path=${CMAKE_BINARY_DIR})

if(CUMEMTRACE_ANALYZER_PROFILE_GENERATE)
  # The instrumented tree. Counters updated atomically: the analyzer runs three threads.
  set(_generate -fprofile-generate=${CUMEMTRACE_ANALYZER_PROFILE_GENERATE} -fprofile-update=prefer-atomic ${_prefix})
  target_compile_options(cumemtrace_analyzer_lib PRIVATE ${_generate})
  target_compile_options(cumem-analyze PRIVATE ${_generate})
  target_link_options(cumem-analyze PRIVATE ${_generate})
  return()
endif()
if(NOT CUMEMTRACE_ANALYZER_PGO)
  return()
endif()

include(ExternalProject)
set(_training_tree ${CMAKE_BINARY_DIR}/analyzer-training)
set(_profile_dir ${CMAKE_BINARY_DIR}/analyzer-profile)
set(_stamp ${CMAKE_BINARY_DIR}/analyzer-profile.stamp)
ExternalProject_Add(analyzer_training_build
  SOURCE_DIR ${PROJECT_SOURCE_DIR}
  BINARY_DIR ${_training_tree}
  CMAKE_ARGS -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
             -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER} -DCUMEMTRACE_BUILD_PRELOAD=OFF -DCUMEMTRACE_BUILD_TESTS=OFF
             -DCUMEMTRACE_BUILD_BENCH=OFF -DCUMEMTRACE_ANALYZER_PGO=OFF
             -DCUMEMTRACE_ANALYZER_PROFILE_GENERATE=${_profile_dir}
  BUILD_COMMAND ${CMAKE_COMMAND} --build ${_training_tree} --target cumem-analyze
  BUILD_ALWAYS ON  # its own build decides what is out of date
  INSTALL_COMMAND ""
  BUILD_BYPRODUCTS ${_training_tree}/analyzer/cumem-analyze)
file(GLOB _examples CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/examples/*.pb)
add_custom_command(OUTPUT ${_stamp}
  COMMAND ${PROJECT_SOURCE_DIR}/analyzer/profile_training.sh ${_training_tree}/analyzer/cumem-analyze ${_profile_dir}
          ${PROJECT_SOURCE_DIR}/examples ${_stamp}
  DEPENDS analyzer_training_build ${_training_tree}/analyzer/cumem-analyze ${_examples}
          ${PROJECT_SOURCE_DIR}/analyzer/profile_training.sh
  COMMENT "Reading the example traces with the instrumented analyzer (profile-guided optimization)"
  VERBATIM)
add_custom_target(analyzer_profile DEPENDS ${_stamp})

# Functions the examples never reach have no counts: they are optimized as usual (-fprofile-partial-training), and
# GCC is not asked to say so for each. The counts always come from these very sources, but the protobuf headers are
# generated into each build tree, so their functions' file names differ between the two trees, which GCC calls a
# mismatch (an error by default); their counts still fit.
set(_use -fprofile-use=${_profile_dir} -fprofile-partial-training -Wno-missing-profile -Wno-coverage-mismatch
         ${_prefix})
foreach(_target cumemtrace_analyzer_lib cumem-analyze)
  add_dependencies(${_target} analyzer_profile)
  target_compile_options(${_target} PRIVATE ${_use})
  get_target_property(_sources ${_target} SOURCES)
  set_source_files_properties(${_sources} TARGET_DIRECTORY ${_target} PROPERTIES OBJECT_DEPENDS ${_stamp})
endforeach()
