// Where CPython keeps what a stack needs (the thread's current frame, each frame's code object and instruction, the
// code object's names and line table), per interpreter version. These are private structures of CPython that change
// between minor versions, so every number here is checked against the running interpreter before it is trusted
// (python_frames.cc: the type objects' tp_basicsize must equal the sizes below, and every object reached must have
// the expected type).
//
// 3.10, 3.11 and 3.12 come from tables printed with offsetof from each version's own headers. 3.13 and later carry
// their offsets in the interpreter itself (_Py_DebugOffsets, at the start of _PyRuntime, for debuggers): those are
// read from the running interpreter (python_debug_offsets.cc), so any build of a version whose walk is known works,
// a debug build included. Any other version falls back to native frames and says so in the trace; never guess.
#ifndef CUMEMTRACE_PRELOAD_PYTHON_LAYOUT_H_
#define CUMEMTRACE_PRELOAD_PYTHON_LAYOUT_H_

#include <stddef.h>
#include <stdint.h>

#include "preload/python_line_table.h"

namespace cumemtrace::preload {

// How a thread's frames are chained.
enum class FrameChain : uint8_t {
  // 3.10: PyFrameObjects linked by f_back, each run by its own call of the eval loop; the instruction is f_lasti, an
  // int counting code units (-1 before the first instruction).
  kFrameObjects,
  // 3.11+: _PyInterpreterFrames linked by `previous`, several per call of the eval loop; the instruction is a pointer
  // into the code object's bytecode (the last one run in 3.11/3.12, the one running from 3.13 on: either way the
  // instruction that made the call).
  kInterpreterFrames,
};

inline constexpr ptrdiff_t kAbsent = -1;

struct PythonLayout {
  uint32_t major;
  uint32_t minor;
  FrameChain chain;
  LineTableFormat line_table;
  // PyThreadState -> current frame: through _PyCFrame* at thread_cframe (3.11, 3.12), or kAbsent when the thread
  // state holds the frame itself (3.10, 3.13+); current_frame is the offset in whichever holds it.
  ptrdiff_t thread_cframe;
  size_t current_frame;
  // A frame: PyFrameObject (3.10) or _PyInterpreterFrame (3.11+).
  size_t frame_code;         // PyCodeObject* (f_code; f_executable from 3.13)
  size_t frame_previous;     // the caller's frame (f_back; previous)
  size_t frame_instr;        // int f_lasti (3.10); _Py_CODEUNIT* prev_instr (3.11, 3.12) or instr_ptr (3.13+)
  ptrdiff_t frame_owner;     // char owner (3.11+), kAbsent in 3.10
  ptrdiff_t frame_is_entry;  // bool is_entry (3.11), kAbsent where entry frames are shim frames owned by the C stack
  int owner_generator;       // FRAME_OWNED_BY_GENERATOR
  int owner_cstack;          // FRAME_OWNED_BY_CSTACK, -1 where there is none
  size_t frame_type_basicsize;  // PyFrame_Type.tp_basicsize (3.10's frames are objects and checked), 0 otherwise
  // PyCodeObject.
  size_t code_filename;
  size_t code_name;          // co_qualname (3.11+); co_name in 3.10, which has no qualified name
  size_t code_linetable;     // bytes
  size_t code_firstlineno;   // int
  ptrdiff_t code_firsttraceable;  // int: code units before it belong to a frame still being set up (3.11+)
  size_t code_bytecode;      // co_code_adaptive, the bytecode (3.11+)
  size_t code_type_basicsize;  // PyCode_Type.tp_basicsize
  // Objects: PyObject.ob_type, PyVarObject.ob_size, PyBytesObject.ob_sval, PyASCIIObject.length and .state.
  size_t object_type;
  size_t var_object_size;
  size_t bytes_data;
  size_t unicode_length;
  size_t unicode_state;
  // str objects: sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject), sizeof(PyUnicodeObject).
  size_t ascii_object_size;
  size_t compact_object_size;
  size_t unicode_type_basicsize;
};

// Layout of CPython major.minor from this file's tables, or nullptr when there is none (3.13+ come from the
// interpreter: ReadDebugOffsetsLayout in python_debug_offsets.h).
const PythonLayout* FindPythonLayout(uint32_t major, uint32_t minor);

// PyTypeObject.tp_basicsize: after the object header (ob_refcnt, ob_type, ob_size) and tp_name. The same in every
// supported version; a build whose object header is larger (Py_TRACE_REFS) has object_type != 8 and is refused.
inline constexpr size_t kTypeBasicsize = 32;

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_PYTHON_LAYOUT_H_
