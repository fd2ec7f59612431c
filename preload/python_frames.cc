#include "preload/python_frames.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "preload/python_layout.h"
#include "preload/symbol_resolver.h"

namespace cumemtrace::preload {
namespace {

using GetThreadStateFn = void* (*)();
using IsFinalizingFn = int (*)();

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
  uintptr_t eval_start = 0;
  uintptr_t eval_end = 0;
};
Runtime g_runtime;
char g_message[256];  // why Python frames are off, for the trace's notice; written before `support` is published

template <typename T>
T Read(uintptr_t address) {
  T value;
  memcpy(&value, reinterpret_cast<const void*>(address), sizeof(T));
  return value;
}

bool HasType(uintptr_t object, uintptr_t type) {
  return object != 0 && type != 0 && Read<uintptr_t>(object + kObjectType) == type;
}

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

uint32_t ReadVarint(const uint8_t*& p, const uint8_t* end) {
  if (p >= end) return 0;
  uint32_t read = *p++;
  uint32_t value = read & 63;
  uint32_t shift = 0;
  while ((read & 64) != 0 && p < end && shift < 30) {
    read = *p++;
    shift += 6;
    value |= (read & 63) << shift;
  }
  return value;
}

int32_t ReadSignedVarint(const uint8_t*& p, const uint8_t* end) {
  uint32_t value = ReadVarint(p, end);
  return (value & 1) != 0 ? -static_cast<int32_t>(value >> 1) : static_cast<int32_t>(value >> 1);
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
  const uint64_t length = Read<uint64_t>(object + kUnicodeLength);
  const uint32_t state = Read<uint32_t>(object + kUnicodeState);
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
  g_runtime.layout = r.layout;
  g_runtime.this_thread_state = r.this_thread_state;
  g_runtime.is_finalizing = r.is_finalizing;
  g_runtime.code_type = r.code_type;
  g_runtime.unicode_type = r.unicode_type;
  g_runtime.bytes_type = r.bytes_type;
  g_runtime.eval_start = r.eval_start;
  g_runtime.eval_end = r.eval_end;
  __atomic_store_n(&g_runtime.support, r.support, __ATOMIC_RELEASE);
}

PythonSupport Support() { return __atomic_load_n(&g_runtime.support, __ATOMIC_ACQUIRE); }

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
  // Py_Version (PY_VERSION_HEX) exists from 3.11 on; an older interpreter has none.
  const void* version = Lookup("Py_Version");
  if (version == nullptr) {
    r.support = PythonSupport::kUnsupported;
    snprintf(message, size, "Python older than 3.11 in this process: stacks have native frames only");
    Publish(r);
    return r.support;
  }
  const unsigned long hex = *static_cast<const unsigned long*>(version);
  const uint32_t major = (hex >> 24) & 0xFF, minor = (hex >> 16) & 0xFF, micro = (hex >> 8) & 0xFF;
  r.layout = FindPythonLayout(major, minor);
  if (r.layout == nullptr) {
    r.support = PythonSupport::kUnsupported;
    snprintf(message, size,
             "Python %u.%u.%u: its frame layout is not verified by this cumemtrace (3.11 and 3.12 are); stacks have "
             "native frames only", major, minor, micro);
    Publish(r);
    return r.support;
  }
  r.this_thread_state = reinterpret_cast<GetThreadStateFn>(thread_state);
  r.is_finalizing = reinterpret_cast<IsFinalizingFn>(Lookup("_Py_IsFinalizing"));
  r.code_type = reinterpret_cast<uintptr_t>(Lookup("PyCode_Type"));
  r.unicode_type = reinterpret_cast<uintptr_t>(Lookup("PyUnicode_Type"));
  r.bytes_type = reinterpret_cast<uintptr_t>(Lookup("PyBytes_Type"));
  FunctionRange(Lookup("_PyEval_EvalFrameDefault"), &r.eval_start, &r.eval_end);
  const uint64_t code_size = r.code_type != 0 ? Read<uint64_t>(r.code_type + kTypeBasicsize) : 0;
  const uint64_t unicode_size = r.unicode_type != 0 ? Read<uint64_t>(r.unicode_type + kTypeBasicsize) : 0;
  if (r.code_type == 0 || r.unicode_type == 0 || r.bytes_type == 0 || code_size != r.layout->code_adaptive ||
      unicode_size != r.layout->unicode_type_basicsize) {
    r.support = PythonSupport::kLayoutMismatch;
    snprintf(message, size,
             "Python %u.%u.%u: code objects are %llu bytes and str objects %llu (expected %zu and %zu); stacks have "
             "native frames only", major, minor, micro, static_cast<unsigned long long>(code_size),
             static_cast<unsigned long long>(unicode_size), r.layout->code_adaptive,
             r.layout->unicode_type_basicsize);
    r.layout = nullptr;
    Publish(r);
    return r.support;
  }
  r.support = PythonSupport::kReady;
  Publish(r);
  return r.support;
}

PythonSupport PythonFramesSupport() { return Support(); }

const char* PythonSupportMessage() { return Support() == PythonSupport::kAbsent ? "" : g_message; }

bool IsEvalLoopPc(uintptr_t pc) { return pc - 1 >= g_runtime.eval_start && pc - 1 < g_runtime.eval_end; }

PythonCapture CapturePythonStack(RawPythonStack* out) {
  out->count = 0;
  out->group_count = 0;
  if (Support() != PythonSupport::kReady) return PythonCapture::kOff;
  const PythonLayout& l = *g_runtime.layout;
  if (g_runtime.is_finalizing != nullptr && g_runtime.is_finalizing() != 0) return PythonCapture::kNoThreadState;
  const uintptr_t thread = reinterpret_cast<uintptr_t>(g_runtime.this_thread_state());
  if (thread == 0) return PythonCapture::kNoThreadState;
  const uintptr_t cframe = Read<uintptr_t>(thread + l.thread_cframe);
  if (cframe == 0) return PythonCapture::kNoThreadState;
  uintptr_t frame = Read<uintptr_t>(cframe + l.cframe_current_frame);
  PythonCapture result = PythonCapture::kOk;
  auto close_group = [&] {
    if (out->group_count < kMaxPythonFrames) out->group_end[out->group_count++] = static_cast<uint16_t>(out->count);
  };
  // A cycle cannot happen in a sane chain; the step limit makes sure a broken one cannot hang the program.
  for (int steps = 0; frame != 0 && steps < 4 * kMaxPythonFrames; ++steps) {
    const int owner = Read<int8_t>(frame + l.frame_owner);
    const uintptr_t previous = Read<uintptr_t>(frame + l.frame_previous);
    if (l.owner_cstack >= 0 && owner == l.owner_cstack) {  // 3.12+: the shim frame at the base of an eval call
      close_group();
      frame = previous;
      continue;
    }
    const uintptr_t code = Read<uintptr_t>(frame + l.frame_code);
    if (!HasType(code, g_runtime.code_type)) {
      result = PythonCapture::kBroken;
      break;
    }
    const uintptr_t first = code + l.code_adaptive;
    const uintptr_t prev_instr = Read<uintptr_t>(frame + l.frame_prev_instr);
    const int32_t first_traceable = Read<int32_t>(code + l.code_firsttraceable);
    // A frame whose instruction pointer has not reached its first traceable instruction is still being set up.
    const bool incomplete = owner != l.owner_generator &&
                            prev_instr < first + 2 * static_cast<uintptr_t>(first_traceable < 0 ? 0 : first_traceable);
    if (!incomplete && out->count < kMaxPythonFrames) {
      out->frames[out->count++] = RawPythonFrame{code, static_cast<int32_t>((prev_instr - first) / 2)};
    }
    if (l.frame_is_entry >= 0 && Read<uint8_t>(frame + static_cast<size_t>(l.frame_is_entry)) != 0) close_group();
    frame = previous;
  }
  if (out->group_count == 0 || out->group_end[out->group_count - 1] != out->count) close_group();
  return result;
}

uint32_t DecodeLocationTableLine(const uint8_t* table, size_t size, int first_line, int32_t instr) {
  const uint8_t* p = table;
  const uint8_t* end = table + size;
  int32_t line = first_line;
  int32_t address = 0;  // code units
  while (p < end) {
    const uint8_t head = *p++;
    if ((head & 0x80) == 0) return 0;  // not at the start of an entry: the table is not what we think
    const int code = (head >> 3) & 15;
    const int32_t length = (head & 7) + 1;
    bool has_line = true;
    switch (code) {
      case 15:  // no location
        has_line = false;
        break;
      case 14:  // long form: line delta, end line delta, column, end column
        line += ReadSignedVarint(p, end);
        ReadVarint(p, end);
        ReadVarint(p, end);
        ReadVarint(p, end);
        break;
      case 13:  // no column: line delta
        line += ReadSignedVarint(p, end);
        break;
      case 10:
      case 11:
      case 12:  // one-line forms: line delta code - 10, then column and end column bytes
        line += code - 10;
        p += 2;
        break;
      default:  // short forms: same line, one column byte
        p += 1;
        break;
    }
    if (instr >= address && instr < address + length) return has_line && line > 0 ? static_cast<uint32_t>(line) : 0;
    address += length;
  }
  return 0;
}

uint32_t PythonLine(uintptr_t code, int32_t instr) {
  const PythonLayout* l = g_runtime.layout;
  if (l == nullptr) return 0;
  const uintptr_t table = Read<uintptr_t>(code + l->code_linetable);
  if (!HasType(table, g_runtime.bytes_type)) return 0;
  const int64_t size = Read<int64_t>(table + kVarObjectSize);
  if (size <= 0) return 0;
  return DecodeLocationTableLine(reinterpret_cast<const uint8_t*>(table + kBytesData), static_cast<size_t>(size),
                                 Read<int32_t>(code + l->code_firstlineno), instr);
}

size_t PythonCodeFile(uintptr_t code, char* out, size_t size) {
  return g_runtime.layout == nullptr ? 0 : ReadString(Read<uintptr_t>(code + g_runtime.layout->code_filename), out, size);
}

size_t PythonCodeName(uintptr_t code, char* out, size_t size) {
  return g_runtime.layout == nullptr ? 0 : ReadString(Read<uintptr_t>(code + g_runtime.layout->code_qualname), out, size);
}

PythonCodeIdentity IdentifyPythonCode(uintptr_t code) {
  const PythonLayout& l = *g_runtime.layout;
  return PythonCodeIdentity{Read<uintptr_t>(code + l.code_filename), Read<uintptr_t>(code + l.code_qualname),
                            Read<uintptr_t>(code + l.code_linetable), Read<int32_t>(code + l.code_firstlineno)};
}

}  // namespace cumemtrace::preload
