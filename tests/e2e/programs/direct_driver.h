// The driver table of a program linked against libcuda.so.1: every member is the exported cu* function itself, so
// each call binds to the exported name (and, under the preload, to cumemtrace's exported hook). Only for programs
// that link the (fake) libcuda; the others must not include it.
#ifndef CUMEMTRACE_TESTS_E2E_PROGRAMS_DIRECT_DRIVER_H_
#define CUMEMTRACE_TESTS_E2E_PROGRAMS_DIRECT_DRIVER_H_

#include <cuda.h>

#include "program_support.h"

namespace cumemtrace::e2e {

inline DriverApi DirectDriver() {
  DriverApi cu;
#define E2E_FILL_DIRECT(member, base_name, exported_name, prototype) cu.member = &prototype;
  E2E_DRIVER_FUNCTIONS(E2E_FILL_DIRECT)
#undef E2E_FILL_DIRECT
  return cu;
}

}  // namespace cumemtrace::e2e

#endif  // CUMEMTRACE_TESTS_E2E_PROGRAMS_DIRECT_DRIVER_H_
