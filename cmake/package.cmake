# CPack: `cpack -G DEB` (in the build folder) makes cumemtrace_<version>_<arch>.deb from the install rules of
# cmake/install.cmake, without the `bundled` component: instead of copies, dpkg-shlibdeps makes the package depend
# on the Debian packages the ELF files need (libunwind8 for the preload; libc6, libstdc++6, protobuf, Abseil, libdw1
# for the analyzer). The preload also dlopens libdw for file:line at exit, which shlibdeps cannot see: Recommends. The prefix is /usr, so the files land in /usr/bin and
# /usr/lib, and `cumemtrace` finds /usr/lib/libcumemtrace.so beside its own folder.
include_guard(GLOBAL)

set(CPACK_PACKAGE_NAME cumemtrace)
set(CPACK_PACKAGE_VENDOR "cumemtrace")
set(CPACK_PACKAGE_CONTACT "cumemtrace maintainers <cumemtrace@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "CUDA memory profiler: an LD_PRELOAD tracer and its offline analyzer")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};${PROJECT_NAME};Unspecified;/")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libdw1")
set(CPACK_GENERATOR DEB)
include(CPack)
