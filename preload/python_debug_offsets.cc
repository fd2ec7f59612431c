#include "preload/python_debug_offsets.h"

#include <stdio.h>
#include <string.h>

namespace cumemtrace::preload {
namespace {

// The fields every version's _Py_DebugOffsets starts with.
struct DebugOffsetsHead {
  char cookie[8];
  uint64_t version;  // PY_VERSION_HEX
  uint64_t free_threaded;
};

// 3.13's _Py_DebugOffsets up to the str object's offsets, restated from 3.13's internal/pycore_runtime.h: groups of
// uint64_t, each group starting with the size of the structure it describes. Only the fields the walk reads are
// named; the others keep their place.
struct DebugOffsets313 {
  DebugOffsetsHead head;
  uint64_t runtime_state[3];      // size, finalizing, interpreters_head
  uint64_t interpreter_state[13];
  struct {
    uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk, status;
  } thread_state;
  struct {
    uint64_t size, previous, executable, instr_ptr, localsplus, owner;
  } interpreter_frame;
  struct {
    uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames, localspluskinds,
        co_code_adaptive;
  } code_object;
  struct {
    uint64_t size, ob_type;
  } pyobject;
  uint64_t type_object[4];
  uint64_t tuple_object[3];
  uint64_t list_object[3];
  uint64_t dict_object[3];
  uint64_t float_object[2];
  uint64_t long_object[3];
  struct {
    uint64_t size, ob_size, ob_sval;
  } bytes_object;
  struct {
    uint64_t size, state, length, asciiobject_size;
  } unicode_object;
};

DebugOffsetsResult Layout313(const DebugOffsets313& d, PythonLayout* l, char* why, size_t why_size) {
  if (d.pyobject.ob_type != 8) {  // a larger object header (Py_TRACE_REFS) moves every type object's fields too
    snprintf(why, why_size, "its object header is not two words (ob_type at %llu)",
             static_cast<unsigned long long>(d.pyobject.ob_type));
    return DebugOffsetsResult::kMismatch;
  }
  *l = PythonLayout{};
  l->major = 3;
  l->minor = 13;
  l->chain = FrameChain::kInterpreterFrames;
  l->line_table = LineTableFormat::kLocations;
  l->thread_cframe = kAbsent;
  l->current_frame = d.thread_state.current_frame;
  l->frame_code = d.interpreter_frame.executable;
  l->frame_previous = d.interpreter_frame.previous;
  l->frame_instr = d.interpreter_frame.instr_ptr;
  l->frame_owner = static_cast<ptrdiff_t>(d.interpreter_frame.owner);
  l->frame_is_entry = kAbsent;
  // 3.13's internal/pycore_frame.h: the frame-owner values are not among the offsets.
  l->owner_generator = 1;
  l->owner_cstack = 3;
  l->frame_type_basicsize = 0;
  l->code_filename = d.code_object.filename;
  l->code_name = d.code_object.qualname;
  l->code_linetable = d.code_object.linetable;
  l->code_firstlineno = d.code_object.firstlineno;
  // Not among the offsets: 3.13's cpython/code.h puts `int _co_firsttraceable; void *co_extra;` right before the
  // bytecode, so it sits 16 bytes before it.
  l->code_firsttraceable = static_cast<ptrdiff_t>(d.code_object.co_code_adaptive) - 16;
  l->code_bytecode = d.code_object.co_code_adaptive;
  // PyCode_Type's tp_basicsize is offsetof(PyCodeObject, co_code_adaptive): the check that these offsets are the
  // running interpreter's.
  l->code_type_basicsize = d.code_object.co_code_adaptive;
  l->object_type = d.pyobject.ob_type;
  l->var_object_size = d.bytes_object.ob_size;
  l->bytes_data = d.bytes_object.ob_sval;
  l->unicode_length = d.unicode_object.length;
  l->unicode_state = d.unicode_object.state;
  l->ascii_object_size = d.unicode_object.asciiobject_size;
  // 3.13's cpython/unicodeobject.h: a compact non-ASCII str adds utf8_length and utf8 to PyASCIIObject, and a
  // non-compact one a data pointer after that; PyUnicode_Type's tp_basicsize checks the sum.
  l->compact_object_size = l->ascii_object_size + 16;
  l->unicode_type_basicsize = l->compact_object_size + 8;
  return DebugOffsetsResult::kOk;
}

}  // namespace

DebugOffsetsResult ReadDebugOffsetsLayout(const void* runtime, uint64_t version_hex, PythonLayout* layout, char* why,
                                          size_t why_size) {
  why[0] = '\0';
  if (runtime == nullptr) {
    snprintf(why, why_size, "the interpreter exports no _PyRuntime to read its debug offsets from");
    return DebugOffsetsResult::kMismatch;
  }
  DebugOffsetsHead head;
  memcpy(&head, runtime, sizeof(head));
  if (memcmp(head.cookie, "xdebugpy", 8) != 0) {
    snprintf(why, why_size, "_PyRuntime does not start with its debug offsets (no \"xdebugpy\" cookie)");
    return DebugOffsetsResult::kMismatch;
  }
  if (head.version != version_hex) {
    snprintf(why, why_size, "its debug offsets are those of version 0x%08llx",
             static_cast<unsigned long long>(head.version));
    return DebugOffsetsResult::kMismatch;
  }
  const uint32_t minor = (version_hex >> 16) & 0xFF;
  if (head.free_threaded != 0) {
    snprintf(why, why_size, "a free-threaded build, whose frames this cumemtrace has not been verified against");
    return DebugOffsetsResult::kUnsupported;
  }
  if (minor == 13) {
    DebugOffsets313 offsets;
    memcpy(&offsets, runtime, sizeof(offsets));
    return Layout313(offsets, layout, why, why_size);
  }
  if (minor == 14) {
    // 3.14's frames refer to their code object through a tagged _PyStackRef, not a plain pointer.
    snprintf(why, why_size, "its frames hold tagged references (_PyStackRef) that this cumemtrace has not been "
                            "verified against");
    return DebugOffsetsResult::kUnsupported;
  }
  snprintf(why, why_size, "the layout of its debug offsets is not known to this cumemtrace");
  return DebugOffsetsResult::kUnsupported;
}

}  // namespace cumemtrace::preload
