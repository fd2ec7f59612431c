# What `cmake --install` puts under the prefix, so that users get `cumemtrace` and `cumem-analyze` on their PATH:
#   bin/cumemtrace (the launcher; it finds ../lib/libcumemtrace.so relative to itself), bin/cumem-analyze,
#   lib/libcumemtrace.so, share/doc/cumemtrace/ (README and docs/).
# Component `bundled`: the libraries the preload loads (libunwind.so.8 as DT_NEEDED, libdw.so.1 and libelf.so.1 by
# dlopen, for file:line at exit), copied beside libcumemtrace.so where its RUNPATH $ORIGIN finds them, so that an
# install into any prefix runs on a machine that lacks them (the GPU machine). The .deb leaves this component out
# and depends on Debian's packages instead (cmake/package.cmake): a package must not ship copies of system
# libraries.
include_guard(GLOBAL)

install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/cumemtrace DESTINATION bin)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION share/doc/cumemtrace)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION share/doc/cumemtrace/docs FILES_MATCHING PATTERN "*.md")

if(TARGET cumemtrace)
  install(TARGETS cumemtrace LIBRARY DESTINATION lib)
  # The real files behind the sonames the preload asks for, as found at configure time on this machine.
  find_library(CUMEMTRACE_UNWIND_SO NAMES libunwind.so.8 unwind)
  find_library(CUMEMTRACE_DW_SO NAMES libdw.so.1 dw)
  find_library(CUMEMTRACE_ELF_SO NAMES libelf.so.1 elf)
  foreach(pair "CUMEMTRACE_UNWIND_SO;libunwind.so.8" "CUMEMTRACE_DW_SO;libdw.so.1" "CUMEMTRACE_ELF_SO;libelf.so.1")
    list(GET pair 0 var)
    list(GET pair 1 soname)
    if(${var})
      get_filename_component(real ${${var}} REALPATH)
      install(FILES ${real} DESTINATION lib RENAME ${soname} COMPONENT bundled)
    endif()
  endforeach()
endif()
