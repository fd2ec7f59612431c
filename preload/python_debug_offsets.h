// CPython 3.13+ publishes the offsets a debugger needs at the start of _PyRuntime (_Py_DebugOffsets: the cookie
// "xdebugpy", the version, whether the build is free-threaded, then offsets into the thread state, frames, code
// objects and str objects). Reading them from the running interpreter, rather than from a table, makes any build of
// a known version work (a debug build, a distribution's patched build). The struct itself is laid out differently
// in each minor version, so only versions whose struct and walk are known are read; the rest are refused with a
// reason.
#ifndef CUMEMTRACE_PRELOAD_PYTHON_DEBUG_OFFSETS_H_
#define CUMEMTRACE_PRELOAD_PYTHON_DEBUG_OFFSETS_H_

#include <stddef.h>
#include <stdint.h>

#include "preload/python_layout.h"

namespace cumemtrace::preload {

enum class DebugOffsetsResult {
  kOk,           // *layout is filled
  kUnsupported,  // a version or build (free-threaded) whose walk this cumemtrace does not know
  kMismatch,     // the offsets are not what the version says (bad cookie, another version, another object header)
};

// Fills *layout from the debug offsets at `runtime` (the address of _PyRuntime) of an interpreter whose Py_Version
// is `version_hex`. On anything but kOk, `why` (size `why_size`) says what, after "Python X.Y.Z: ".
DebugOffsetsResult ReadDebugOffsetsLayout(const void* runtime, uint64_t version_hex, PythonLayout* layout, char* why,
                                          size_t why_size);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_PYTHON_DEBUG_OFFSETS_H_
