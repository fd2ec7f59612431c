// Reads the calling thread's Python frames straight from CPython's own structures, without the GIL and without
// running any Python: the thread that calls cudaMalloc inside PyTorch never holds the GIL, and taking it there can
// deadlock against the caching allocator's lock. This is safe because a thread reads only its own frame chain,
// which cannot change while that thread is inside a hook, and every frame holds a reference to its code object.
// The C API functions used, PyGILState_GetThisThreadState and Py_IsFinalizing (_Py_IsFinalizing before 3.13),
// only read thread-specific storage and a runtime flag; Py_GetVersion (3.10, which has no Py_Version) is called once,
// at attach.
//
// Never: call into the interpreter beyond that lookup, follow a pointer to an object whose type was not checked, or
// trust a layout (python_layout.h) the running interpreter does not confirm.
#ifndef CUMEMTRACE_PRELOAD_PYTHON_FRAMES_H_
#define CUMEMTRACE_PRELOAD_PYTHON_FRAMES_H_

#include <stddef.h>
#include <stdint.h>

namespace cumemtrace::preload {

inline constexpr int kMaxPythonFrames = 128;

// One frame as found: its code object and the index (in code units) of its current instruction.
struct RawPythonFrame {
  uintptr_t code;
  int32_t instr;
};

// The calling thread's Python frames, innermost first, split into the groups each C-level call of the interpreter's
// eval loop ran: group g is frames [g == 0 ? 0 : group_end[g - 1], group_end[g]).
struct RawPythonStack {
  int count;
  int group_count;
  uint16_t group_end[kMaxPythonFrames + 1];
  RawPythonFrame frames[kMaxPythonFrames];
};

enum class PythonCapture {
  kOff,            // Python frames are off, or the process does not run a supported Python
  kNoThreadState,  // Python runs, but this thread has no Python thread state (e.g. an autograd engine thread)
  kOk,             // `count` frames (maybe 0)
  kBroken,         // the chain did not validate; frames read before the break are kept
};

// What InitPythonFrames found, for the trace's notice.
enum class PythonSupport { kAbsent, kDisabled, kUnsupported, kLayoutMismatch, kReady };

// Looks for a Python interpreter in the process (again only while none was found). Takes the dynamic loader's lock
// (dlsym): call it where no lock of the recorder is held (the preload's constructor, the flush thread).
PythonSupport InitPythonFrames(bool enabled);
PythonSupport PythonFramesSupport();
// What InitPythonFrames found when the result is kUnsupported or kLayoutMismatch ("" otherwise).
const char* PythonSupportMessage();

// Fills `out` with the calling thread's frames.
PythonCapture CapturePythonStack(RawPythonStack* out);

// True if the return address `pc` lies in the interpreter's eval loop (_PyEval_EvalFrameDefault).
bool IsEvalLoopPc(uintptr_t pc);

// The source line of instruction `instr` of `code`, 0 when unknown. Only for code objects of a captured stack.
uint32_t PythonLine(uintptr_t code, int32_t instr);

// The code object's file name and qualified name as UTF-8 into `out` (size `size`, always NUL-terminated). Returns
// the length, or 0 when the object is not a str.
size_t PythonCodeFile(uintptr_t code, char* out, size_t size);
size_t PythonCodeName(uintptr_t code, char* out, size_t size);

// Identity of a code object beyond its address (which CPython may reuse after freeing it).
struct PythonCodeIdentity {
  uintptr_t filename;
  uintptr_t qualname;
  uintptr_t linetable;
  int32_t firstlineno;
};
PythonCodeIdentity IdentifyPythonCode(uintptr_t code);
inline bool SameIdentity(const PythonCodeIdentity& x, const PythonCodeIdentity& y) {
  return x.filename == y.filename && x.qualname == y.qualname && x.linetable == y.linetable &&
         x.firstlineno == y.firstlineno;
}

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_PYTHON_FRAMES_H_
