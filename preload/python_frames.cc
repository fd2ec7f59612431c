#include "preload/python_frames.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "preload/python_debug_offsets.h"
#include "preload/python_layout.h"
#include "preload/python_line_table.h"
#include "preload/symbol_resolver.h"

namespace cumemtrace::preload {
namespace {

using GetThreadStateFn = void* (*)();
using IsFinalizingFn = int (*)();
using GetVersionFn = const char* (*)();

// Filled by InitPythonFrames; `support` is published last (release) and read first (acquire), so a thread that
// sees kReady sees the rest. Only an absent interpreter is looked for again, and then nobody reads the rest.
struct Runtime {
  PythonSupport support = PythonSupport::kAbsent;
  const PythonLayout* layout = nullptr;
  GetThreadStateFn this_thread_state = nullptr;
  // While the interpreter shuts down, other threads' thread states are freed before their thread-specific pointer
  // to them is cleared: no frame is read then.
  IsFinalizingFn is_finalizing = nullptr;
  uintptr_t code_type = 0;
  uintptr_t unicode_type = 0;
  uintptr_t bytes_type = 0;
  uintptr_t frame_type = 0;  // 3.10's frames are objects of this type
  uintptr_t eval_start = 0;
  uintptr_t eval_end = 0;
};
Runtime g_runtime;
PythonLayout g_layout;  // what g_runtime.layout points to: 3.13+'s is built from the running interpreter
char g_message[256];  // why Python frames are off, for the trace's notice; written before `support` is published

template <typename T>
T Read(uintptr_t address) {
  T value;
  memcpy(&value, reinterpret_cast<const void*>(address), sizeof(T));
  return value;
}

// `type_offset`: the layout's object_type, passed in by loops that keep it in a register.
bool HasType(uintptr_t object, uintptr_t type, size_t type_offset) {
  return object != 0 && type != 0 && Read<uintptr_t>(object + type_offset) == type;
}

bool HasType(uintptr_t object, uintptr_t type) { return HasType(object, type, g_runtime.layout->object_type); }

void* Lookup(const char* name) { return RealDlsym()(RTLD_DEFAULT, name); }

// [start, end) of the function containing `function`, from its dynamic symbol's size.
void FunctionRange(void* function, uintptr_t* start, uintptr_t* end) {
  Dl_info info;
  const ElfW(Sym)* symbol = nullptr;
  if (function == nullptr ||
      dladdr1(function, &info, reinterpret_cast<void**>(const_cast<ElfW(Sym)**>(&symbol)), RTLD_DL_SYMENT) == 0 ||
      symbol == nullptr || info.dli_saddr == nullptr) {
    return;
  }
  *start = reinterpret_cast<uintptr_t>(info.dli_saddr);
  *end = *start + (symbol->st_size != 0 ? symbol->st_size : 1);
}

// Appends code point `c` as UTF-8; false when it does not fit.
bool PutUtf8(uint32_t c, char* out, size_t size, size_t* at) {
  char buffer[4];
  size_t n;
  if (c < 0x80) {
    buffer[0] = static_cast<char>(c);
    n = 1;
  } else if (c < 0x800) {
    buffer[0] = static_cast<char>(0xC0 | (c >> 6));
    buffer[1] = static_cast<char>(0x80 | (c & 0x3F));
    n = 2;
  } else if (c < 0x10000) {
    buffer[0] = static_cast<char>(0xE0 | (c >> 12));
    buffer[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    buffer[2] = static_cast<char>(0x80 | (c & 0x3F));
    n = 3;
  } else {
    buffer[0] = static_cast<char>(0xF0 | (c >> 18));
    buffer[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    buffer[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    buffer[3] = static_cast<char>(0x80 | (c & 0x3F));
    n = 4;
  }
  if (*at + n >= size) return false;
  memcpy(out + *at, buffer, n);
  *at += n;
  return true;
}

// A str object as UTF-8 (cut at `size` - 1 bytes on a character boundary).
size_t ReadString(uintptr_t object, char* out, size_t size) {
  if (size == 0) return 0;
  out[0] = '\0';
  const PythonLayout* l = g_runtime.layout;
  if (l == nullptr || !HasType(object, g_runtime.unicode_type)) return 0;
  const uint64_t length = Read<uint64_t>(object + l->unicode_length);
  const uint32_t state = Read<uint32_t>(object + l->unicode_state);
  const uint32_t kind = (state >> 2) & 7;
  const bool compact = ((state >> 5) & 1) != 0;
  const bool ascii = ((state >> 6) & 1) != 0;
  uintptr_t data;
  if (compact) {
    data = object + (ascii ? l->ascii_object_size : l->compact_object_size);
  } else {
    data = Read<uintptr_t>(object + l->compact_object_size);  // PyUnicodeObject.data.any
  }
  if (data == 0 || (kind != 1 && kind != 2 && kind != 4)) return 0;
  size_t at = 0;
  for (uint64_t i = 0; i < length; ++i) {
    uint32_t c = kind == 1 ? Read<uint8_t>(data + i) : kind == 2 ? Read<uint16_t>(data + 2 * i)
                                                                 : Read<uint32_t>(data + 4 * i);
    if (!PutUtf8(c, out, size, &at)) break;
  }
  out[at] = '\0';
  return at;
}

void Publish(const Runtime& r) {
  if (r.layout != nullptr) g_layout = *r.layout;
  g_runtime.layout = r.layout != nullptr ? &g_layout : nullptr;
  g_runtime.this_thread_state = r.this_thread_state;
  g_runtime.is_finalizing = r.is_finalizing;
  g_runtime.code_type = r.code_type;
  g_runtime.unicode_type = r.unicode_type;
  g_runtime.bytes_type = r.bytes_type;
  g_runtime.frame_type = r.frame_type;
  g_runtime.eval_start = r.eval_start;
  g_runtime.eval_end = r.eval_end;
  __atomic_store_n(&g_runtime.support, r.support, __ATOMIC_RELEASE);
}

PythonSupport Support() { return __atomic_load_n(&g_runtime.support, __ATOMIC_ACQUIRE); }

// PY_VERSION_HEX of the interpreter: Py_Version from 3.11 on; before, parsed from Py_GetVersion()'s "3.10.13 (...".
// Py_GetVersion only formats a static string, the one call into the interpreter besides those python_frames.h
// names, and is made only here. 0 when neither says.
uint64_t InterpreterVersion() {
  if (const void* version = Lookup("Py_Version")) return *static_cast<const unsigned long*>(version);
  const auto get_version = reinterpret_cast<GetVersionFn>(Lookup("Py_GetVersion"));
  const char* text = get_version != nullptr ? get_version() : nullptr;
  unsigned major = 0, minor = 0, micro = 0;
  if (text == nullptr || sscanf(text, "%u.%u.%u", &major, &minor, &micro) != 3 || major > 255 || minor > 255 ||
      micro > 255) {
    return 0;
  }
  return (static_cast<uint64_t>(major) << 24) | (minor << 16) | (micro << 8);
}

uint64_t TypeBasicsize(uintptr_t type) { return type != 0 ? Read<uint64_t>(type + kTypeBasicsize) : 0; }

// Fills r.layout for major.minor, or says in `message` why there is none and returns the support to publish.
PythonSupport FindLayout(uint64_t hex, Runtime* r, PythonLayout* storage, char* message, size_t size) {
  const uint32_t major = (hex >> 24) & 0xFF, minor = (hex >> 16) & 0xFF, micro = (hex >> 8) & 0xFF;
  if (major == 3 && minor >= 13) {
    char why[160];
    const DebugOffsetsResult read = ReadDebugOffsetsLayout(Lookup("_PyRuntime"), hex, storage, why, sizeof(why));
    if (read != DebugOffsetsResult::kOk) {
      snprintf(message, size, "Python %u.%u.%u: %s; stacks have native frames only", major, minor, micro, why);
      return read == DebugOffsetsResult::kUnsupported ? PythonSupport::kUnsupported : PythonSupport::kLayoutMismatch;
    }
    r->layout = storage;
    return PythonSupport::kReady;
  }
  r->layout = FindPythonLayout(major, minor);
  if (r->layout == nullptr) {
    snprintf(message, size,
             "Python %u.%u.%u: its frame layout is not known to this cumemtrace (3.10 to 3.13 are); stacks have "
             "native frames only", major, minor, micro);
    return PythonSupport::kUnsupported;
  }
  return PythonSupport::kReady;
}

}  // namespace

PythonSupport InitPythonFrames(bool enabled) {
  if (Support() != PythonSupport::kAbsent) return Support();
  char* message = g_message;
  const size_t size = sizeof(g_message);
  Runtime r;
  if (!enabled) {
    r.support = PythonSupport::kDisabled;
    Publish(r);
    return r.support;
  }
  void* thread_state = Lookup("PyGILState_GetThisThreadState");
  if (thread_state == nullptr) {
    Publish(r);  // no Python in this process (yet)
    return r.support;
  }
  const uint64_t hex = InterpreterVersion();
  if (hex == 0) {
    r.support = PythonSupport::kUnsupported;
    snprintf(message, size, "a Python whose version cannot be read runs in this process: stacks have native frames "
                            "only");
    Publish(r);
    return r.support;
  }
  PythonLayout storage;
  r.support = FindLayout(hex, &r, &storage, message, size);
  if (r.support != PythonSupport::kReady) {
    r.layout = nullptr;
    Publish(r);
    return r.support;
  }
  const PythonLayout& l = *r.layout;
  r.this_thread_state = reinterpret_cast<GetThreadStateFn>(thread_state);
  // Py_IsFinalizing is public from 3.13 on, _Py_IsFinalizing before.
  r.is_finalizing = reinterpret_cast<IsFinalizingFn>(Lookup("Py_IsFinalizing"));
  if (r.is_finalizing == nullptr) r.is_finalizing = reinterpret_cast<IsFinalizingFn>(Lookup("_Py_IsFinalizing"));
  r.code_type = reinterpret_cast<uintptr_t>(Lookup("PyCode_Type"));
  r.unicode_type = reinterpret_cast<uintptr_t>(Lookup("PyUnicode_Type"));
  r.bytes_type = reinterpret_cast<uintptr_t>(Lookup("PyBytes_Type"));
  if (l.chain == FrameChain::kFrameObjects) r.frame_type = reinterpret_cast<uintptr_t>(Lookup("PyFrame_Type"));
  FunctionRange(Lookup("_PyEval_EvalFrameDefault"), &r.eval_start, &r.eval_end);
  const uint64_t code_size = TypeBasicsize(r.code_type);
  const uint64_t unicode_size = TypeBasicsize(r.unicode_type);
  const uint64_t frame_size = TypeBasicsize(r.frame_type);
  const bool frames_ok = l.chain != FrameChain::kFrameObjects || frame_size == l.frame_type_basicsize;
  if (r.code_type == 0 || r.unicode_type == 0 || r.bytes_type == 0 || code_size != l.code_type_basicsize ||
      unicode_size != l.unicode_type_basicsize || !frames_ok) {
    const uint32_t major = (hex >> 24) & 0xFF, minor = (hex >> 16) & 0xFF, micro = (hex >> 8) & 0xFF;
    if (!frames_ok) {
      snprintf(message, size,
               "Python %u.%u.%u: frame objects are %llu bytes (expected %zu); stacks have native frames only", major,
               minor, micro, static_cast<unsigned long long>(frame_size), l.frame_type_basicsize);
    } else {
      snprintf(message, size,
               "Python %u.%u.%u: code objects are %llu bytes and str objects %llu (expected %zu and %zu); stacks "
               "have native frames only", major, minor, micro, static_cast<unsigned long long>(code_size),
               static_cast<unsigned long long>(unicode_size), l.code_type_basicsize, l.unicode_type_basicsize);
    }
    r.support = PythonSupport::kLayoutMismatch;
    r.layout = nullptr;
    Publish(r);
    return r.support;
  }
  Publish(r);
  return r.support;
}

PythonSupport PythonFramesSupport() { return Support(); }

const char* PythonSupportMessage() { return Support() == PythonSupport::kAbsent ? "" : g_message; }

bool IsEvalLoopPc(uintptr_t pc) { return pc - 1 >= g_runtime.eval_start && pc - 1 < g_runtime.eval_end; }

namespace {

void CloseGroup(RawPythonStack* out) {
  if (out->group_count < kMaxPythonFrames) out->group_end[out->group_count++] = static_cast<uint16_t>(out->count);
}

// 3.10: every frame object on the chain ran its own call of the eval loop, so each is a group of its own.
PythonCapture WalkFrameObjects(const PythonLayout& l, uintptr_t frame, RawPythonStack* out) {
  // Offsets and types in locals, as in WalkInterpreterFrames below.
  const size_t frame_code = l.frame_code, frame_instr = l.frame_instr, frame_previous = l.frame_previous;
  const size_t object_type = l.object_type;
  const uintptr_t frame_type = g_runtime.frame_type, code_type = g_runtime.code_type;
  // A cycle cannot happen in a sane chain; the step limit makes sure a broken one cannot hang the program.
  for (int steps = 0; frame != 0 && steps < 4 * kMaxPythonFrames; ++steps) {
    if (!HasType(frame, frame_type, object_type)) return PythonCapture::kBroken;
    const uintptr_t code = Read<uintptr_t>(frame + frame_code);
    if (!HasType(code, code_type, object_type)) return PythonCapture::kBroken;
    if (out->count < kMaxPythonFrames) {
      out->frames[out->count++] = RawPythonFrame{code, Read<int32_t>(frame + frame_instr)};
    }
    CloseGroup(out);
    frame = Read<uintptr_t>(frame + frame_previous);
  }
  return PythonCapture::kOk;
}

// 3.11+: one call of the eval loop runs several frames; its first is marked (is_entry in 3.11) or sits on a shim
// frame owned by the C stack (3.12+), which is where a group ends.
PythonCapture WalkInterpreterFrames(const PythonLayout& l, uintptr_t frame, RawPythonStack* out) {
  // The layout's offsets and the frame count in locals: stores into `out` (integers of the same types) would
  // otherwise make the compiler read every offset again for every frame, and this loop runs on every allocation.
  const size_t frame_owner = static_cast<size_t>(l.frame_owner), frame_previous = l.frame_previous;
  const size_t frame_code = l.frame_code, frame_instr = l.frame_instr, object_type = l.object_type;
  const size_t code_bytecode = l.code_bytecode, code_firsttraceable = static_cast<size_t>(l.code_firsttraceable);
  const bool has_is_entry = l.frame_is_entry != kAbsent;
  const size_t frame_is_entry = static_cast<size_t>(l.frame_is_entry);
  const int owner_cstack = l.owner_cstack, owner_generator = l.owner_generator;
  const uintptr_t code_type = g_runtime.code_type;
  int count = out->count;
  PythonCapture result = PythonCapture::kOk;
  for (int steps = 0; frame != 0 && steps < 4 * kMaxPythonFrames; ++steps) {
    const int owner = Read<int8_t>(frame + frame_owner);
    const uintptr_t previous = Read<uintptr_t>(frame + frame_previous);
    if (owner_cstack >= 0 && owner == owner_cstack) {
      out->count = count;
      CloseGroup(out);
      frame = previous;
      continue;
    }
    const uintptr_t code = Read<uintptr_t>(frame + frame_code);
    if (!HasType(code, code_type, object_type)) {
      result = PythonCapture::kBroken;
      break;
    }
    const uintptr_t first = code + code_bytecode;
    const uintptr_t instr = Read<uintptr_t>(frame + frame_instr);
    const int32_t first_traceable = Read<int32_t>(code + code_firsttraceable);
    // A frame whose instruction pointer has not reached its first traceable instruction is still being set up.
    const bool incomplete = owner != owner_generator &&
                            instr < first + 2 * static_cast<uintptr_t>(first_traceable < 0 ? 0 : first_traceable);
    if (!incomplete && count < kMaxPythonFrames) {
      out->frames[count++] = RawPythonFrame{code, static_cast<int32_t>((instr - first) / 2)};
    }
    if (has_is_entry && Read<uint8_t>(frame + frame_is_entry) != 0) {
      out->count = count;
      CloseGroup(out);
    }
    frame = previous;
  }
  out->count = count;
  return result;
}

}  // namespace

PythonCapture CapturePythonStack(RawPythonStack* out) {
  out->count = 0;
  out->group_count = 0;
  if (Support() != PythonSupport::kReady) return PythonCapture::kOff;
  const PythonLayout& l = *g_runtime.layout;
  if (g_runtime.is_finalizing != nullptr && g_runtime.is_finalizing() != 0) return PythonCapture::kNoThreadState;
  const uintptr_t thread = reinterpret_cast<uintptr_t>(g_runtime.this_thread_state());
  if (thread == 0) return PythonCapture::kNoThreadState;
  uintptr_t holder = thread;  // what holds the current frame: the thread state, or 3.11/3.12's _PyCFrame
  if (l.thread_cframe != kAbsent) {
    holder = Read<uintptr_t>(thread + static_cast<size_t>(l.thread_cframe));
    if (holder == 0) return PythonCapture::kNoThreadState;
  }
  const uintptr_t frame = Read<uintptr_t>(holder + l.current_frame);
  const PythonCapture result = l.chain == FrameChain::kFrameObjects ? WalkFrameObjects(l, frame, out)
                                                                     : WalkInterpreterFrames(l, frame, out);
  if (out->group_count == 0 || out->group_end[out->group_count - 1] != out->count) CloseGroup(out);
  return result;
}

uint32_t PythonLine(uintptr_t code, int32_t instr) {
  const PythonLayout* l = g_runtime.layout;
  if (l == nullptr) return 0;
  const uintptr_t table = Read<uintptr_t>(code + l->code_linetable);
  if (!HasType(table, g_runtime.bytes_type)) return 0;
  const int64_t size = Read<int64_t>(table + l->var_object_size);
  if (size <= 0) return 0;
  return DecodeLine(l->line_table, reinterpret_cast<const uint8_t*>(table + l->bytes_data), static_cast<size_t>(size),
                    Read<int32_t>(code + l->code_firstlineno), instr);
}

size_t PythonCodeFile(uintptr_t code, char* out, size_t size) {
  return g_runtime.layout == nullptr ? 0 : ReadString(Read<uintptr_t>(code + g_runtime.layout->code_filename), out, size);
}

size_t PythonCodeName(uintptr_t code, char* out, size_t size) {
  return g_runtime.layout == nullptr ? 0 : ReadString(Read<uintptr_t>(code + g_runtime.layout->code_name), out, size);
}

PythonCodeIdentity IdentifyPythonCode(uintptr_t code) {
  const PythonLayout& l = *g_runtime.layout;
  return PythonCodeIdentity{Read<uintptr_t>(code + l.code_filename), Read<uintptr_t>(code + l.code_name),
                            Read<uintptr_t>(code + l.code_linetable), Read<int32_t>(code + l.code_firstlineno)};
}

}  // namespace cumemtrace::preload
