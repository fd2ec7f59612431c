#include "preload/python_layout.h"

namespace cumemtrace::preload {
namespace {

// Python 3.11: printed with offsetof from /usr/include/python3.11 (internal/pycore_frame.h, cpython/code.h).
constexpr PythonLayout kPython311 = {
    3, 11,
    /*thread_cframe=*/56, /*cframe_current_frame=*/8,
    /*frame_code=*/32, /*frame_previous=*/48, /*frame_prev_instr=*/56, /*frame_owner=*/69,
    /*frame_is_entry=*/68, /*owner_generator=*/1, /*owner_cstack=*/-1,
    /*code_filename=*/112, /*code_qualname=*/128, /*code_linetable=*/136, /*code_firstlineno=*/72,
    /*code_firsttraceable=*/168, /*code_adaptive=*/184,
    /*ascii_object_size=*/48, /*compact_object_size=*/72, /*unicode_type_basicsize=*/80,
};

// Python 3.12: from 3.12's cpython/pystate.h (_status bit field and six ints before cframe), _PyCFrame without
// use_tracing, pycore_frame.h (f_code first, owner after return_offset, FRAME_OWNED_BY_CSTACK = 3), cpython/code.h
// (co_version and co_framesize replace co_warmup and the line array; _co_cached, _co_instrumentation_version and
// _co_monitoring before _co_firsttraceable) and cpython/unicodeobject.h (no wstr). code_adaptive and
// unicode_type_basicsize are checked against the running interpreter.
constexpr PythonLayout kPython312 = {
    3, 12,
    /*thread_cframe=*/56, /*cframe_current_frame=*/0,
    /*frame_code=*/0, /*frame_previous=*/8, /*frame_prev_instr=*/56, /*frame_owner=*/70,
    /*frame_is_entry=*/-1, /*owner_generator=*/1, /*owner_cstack=*/3,
    /*code_filename=*/112, /*code_qualname=*/128, /*code_linetable=*/136, /*code_firstlineno=*/68,
    /*code_firsttraceable=*/176, /*code_adaptive=*/192,
    /*ascii_object_size=*/40, /*compact_object_size=*/56, /*unicode_type_basicsize=*/64,
};

}  // namespace

const PythonLayout* FindPythonLayout(uint32_t major, uint32_t minor) {
  if (major == 3 && minor == 11) return &kPython311;
  if (major == 3 && minor == 12) return &kPython312;
  return nullptr;
}

}  // namespace cumemtrace::preload
