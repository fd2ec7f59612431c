// Where CPython keeps what a stack needs (the thread's current frame, each frame's code object and instruction, the
// code object's names and line table), per interpreter version. These are private structures of CPython that change
// between minor versions, so every number here was taken from that version's headers and is checked against the
// running interpreter before it is trusted (python_frames.cc: PyCode_Type's and PyUnicode_Type's tp_basicsize must
// equal the sizes below, and every object reached must have the expected type).
//
// Only versions whose layout has been verified on a machine this project runs on are listed: 3.11 (the CPU tests,
// offsets printed with offsetof from Python 3.11's own headers) and 3.12 (the GPU machine). Any other version falls
// back to native frames and says so in the trace; never guess a layout.
#ifndef CUMEMTRACE_PRELOAD_PYTHON_LAYOUT_H_
#define CUMEMTRACE_PRELOAD_PYTHON_LAYOUT_H_

#include <stddef.h>
#include <stdint.h>

namespace cumemtrace::preload {

struct PythonLayout {
  uint32_t major;
  uint32_t minor;
  // PyThreadState -> _PyCFrame* cframe -> _PyInterpreterFrame* current_frame.
  size_t thread_cframe;
  size_t cframe_current_frame;
  // _PyInterpreterFrame.
  size_t frame_code;         // PyCodeObject* f_code
  size_t frame_previous;     // _PyInterpreterFrame* previous
  size_t frame_prev_instr;   // _Py_CODEUNIT* prev_instr
  size_t frame_owner;        // char owner
  ptrdiff_t frame_is_entry;  // bool is_entry (3.11), -1 where entry frames are shim frames owned by the C stack
  int owner_generator;       // FRAME_OWNED_BY_GENERATOR
  int owner_cstack;          // FRAME_OWNED_BY_CSTACK, -1 where there is none
  // PyCodeObject.
  size_t code_filename;
  size_t code_qualname;
  size_t code_linetable;     // bytes: the 3.11+ location table
  size_t code_firstlineno;   // int
  size_t code_firsttraceable;  // int: code units before it belong to a frame still being set up
  size_t code_adaptive;      // co_code_adaptive, the bytecode; also PyCode_Type.tp_basicsize
  // str objects: sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject), sizeof(PyUnicodeObject).
  size_t ascii_object_size;
  size_t compact_object_size;
  size_t unicode_type_basicsize;
};

// Layout of CPython major.minor, or nullptr when it has not been verified.
const PythonLayout* FindPythonLayout(uint32_t major, uint32_t minor);

// Layout-independent offsets of the object header, PyVarObject and PyTypeObject used for validation.
inline constexpr size_t kObjectType = 8;          // PyObject.ob_type
inline constexpr size_t kVarObjectSize = 16;      // PyVarObject.ob_size
inline constexpr size_t kTypeBasicsize = 32;      // PyTypeObject.tp_basicsize
inline constexpr size_t kBytesData = 32;          // PyBytesObject.ob_sval
inline constexpr size_t kUnicodeLength = 16;      // PyASCIIObject.length
inline constexpr size_t kUnicodeState = 32;       // PyASCIIObject.state (bit field)

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_PYTHON_LAYOUT_H_
