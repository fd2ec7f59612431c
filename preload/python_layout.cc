#include "preload/python_layout.h"

namespace cumemtrace::preload {
namespace {

// Python 3.10: from 3.10's cpython/pystate.h (PyThreadState.frame), cpython/frameobject.h (f_back, f_code, f_lasti),
// cpython/code.h (co_name; co_linetable in the PEP 626 format) and cpython/unicodeobject.h (wstr still there).
constexpr PythonLayout kPython310 = {
    3, 10, FrameChain::kFrameObjects, LineTableFormat::kAddressPairs,
    /*thread_cframe=*/kAbsent, /*current_frame=*/24,
    /*frame_code=*/32, /*frame_previous=*/24, /*frame_instr=*/96, /*frame_owner=*/kAbsent,
    /*frame_is_entry=*/kAbsent, /*owner_generator=*/-1, /*owner_cstack=*/-1, /*frame_type_basicsize=*/360,
    /*code_filename=*/104, /*code_name=*/112, /*code_linetable=*/120, /*code_firstlineno=*/40,
    /*code_firsttraceable=*/kAbsent, /*code_bytecode=*/0, /*code_type_basicsize=*/176,
    /*object_type=*/8, /*var_object_size=*/16, /*bytes_data=*/32, /*unicode_length=*/16, /*unicode_state=*/32,
    /*ascii_object_size=*/48, /*compact_object_size=*/72, /*unicode_type_basicsize=*/80,
};

// Python 3.11: from 3.11's internal/pycore_frame.h and cpython/code.h.
constexpr PythonLayout kPython311 = {
    3, 11, FrameChain::kInterpreterFrames, LineTableFormat::kLocations,
    /*thread_cframe=*/56, /*current_frame=*/8,
    /*frame_code=*/32, /*frame_previous=*/48, /*frame_instr=*/56, /*frame_owner=*/69,
    /*frame_is_entry=*/68, /*owner_generator=*/1, /*owner_cstack=*/-1, /*frame_type_basicsize=*/0,
    /*code_filename=*/112, /*code_name=*/128, /*code_linetable=*/136, /*code_firstlineno=*/72,
    /*code_firsttraceable=*/168, /*code_bytecode=*/184, /*code_type_basicsize=*/184,
    /*object_type=*/8, /*var_object_size=*/16, /*bytes_data=*/32, /*unicode_length=*/16, /*unicode_state=*/32,
    /*ascii_object_size=*/48, /*compact_object_size=*/72, /*unicode_type_basicsize=*/80,
};

// Python 3.12: from 3.12's cpython/pystate.h, internal/pycore_frame.h (f_code first, owner after return_offset,
// FRAME_OWNED_BY_CSTACK = 3), cpython/code.h and cpython/unicodeobject.h (no wstr).
constexpr PythonLayout kPython312 = {
    3, 12, FrameChain::kInterpreterFrames, LineTableFormat::kLocations,
    /*thread_cframe=*/56, /*current_frame=*/0,
    /*frame_code=*/0, /*frame_previous=*/8, /*frame_instr=*/56, /*frame_owner=*/70,
    /*frame_is_entry=*/kAbsent, /*owner_generator=*/1, /*owner_cstack=*/3, /*frame_type_basicsize=*/0,
    /*code_filename=*/112, /*code_name=*/128, /*code_linetable=*/136, /*code_firstlineno=*/68,
    /*code_firsttraceable=*/176, /*code_bytecode=*/192, /*code_type_basicsize=*/192,
    /*object_type=*/8, /*var_object_size=*/16, /*bytes_data=*/32, /*unicode_length=*/16, /*unicode_state=*/32,
    /*ascii_object_size=*/40, /*compact_object_size=*/56, /*unicode_type_basicsize=*/64,
};

}  // namespace

const PythonLayout* FindPythonLayout(uint32_t major, uint32_t minor) {
  if (major != 3) return nullptr;
  if (minor == 10) return &kPython310;
  if (minor == 11) return &kPython311;
  if (minor == 12) return &kPython312;
  return nullptr;
}

}  // namespace cumemtrace::preload
