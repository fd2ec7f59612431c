// Receives the program's NVTX ranges (its phases: "train", "validate", a layer's forward) without CUPTI, through
// NVTX's injection interface. NVTX 3 is header-only: every library that includes it (PyTorch's torch.cuda.nvtx, the
// program itself) is one instance, which at its first NVTX call loads the library named by NVTX_INJECTION64_PATH
// (the launcher names this one) and calls its InitializeInjectionNvtx2 once. That hands us the instance's callback
// tables (core and core2 modules), whose slots we fill with the functions below; each turns a call into one Phase
// packet through the recorder (RecordPhase). LD_PRELOAD alone is not enough: NVTX 3 looks only at the variable.
//
// Rules as for the hooks: no libstdc++, no heap, nothing exported but the entry point; names are copied into the
// trace under the recorder's lock, so only a registered string (nvtxDomainRegisterString) outlives a call, in a
// static arena. CUMEMTRACE_NVTX=0 declines the injection (NVTX calls are then no-ops).
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include <atomic>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "preload/recorder.h"
#include "proto/format.h"

namespace cumemtrace::preload {
namespace {

constexpr size_t kMaxNameBytes = 1024;

// Range ids handed out by nvtxRangeStart*: unique in the process, 0 never (NVTX's "no range").
std::atomic<uint64_t> g_next_range_id{1};
// Domains the program created, numbered 1, 2, ... (0 is NVTX's default domain, a null handle).
std::atomic<uint32_t> g_next_domain{1};
// nvtxRangePush/Pop's return value: this thread's nesting level.
__thread int t_depth __attribute__((tls_model("initial-exec")));

// Registered strings: a handle points at one of these in the arena, which never frees (programs register a few
// names once and reuse the handle).
struct RegisteredString {
  uint32_t size;
  char bytes[1];
};
constexpr size_t kArenaBytes = 256 * 1024;
alignas(8) char g_arena[kArenaBytes];
std::atomic<size_t> g_arena_used{0};
RegisteredString g_empty_string{0, {0}};

// UTF-8 of a wide string (UTF-32 on Linux) into `out`; returns the bytes written.
size_t WideToUtf8(const wchar_t* text, char* out, size_t size) {
  size_t n = 0;
  for (; text != nullptr && *text != 0; ++text) {
    uint32_t c = static_cast<uint32_t>(*text);
    char buf[4];
    size_t len;
    if (c < 0x80) {
      buf[0] = static_cast<char>(c);
      len = 1;
    } else if (c < 0x800) {
      buf[0] = static_cast<char>(0xC0 | (c >> 6));
      buf[1] = static_cast<char>(0x80 | (c & 0x3F));
      len = 2;
    } else if (c < 0x10000) {
      buf[0] = static_cast<char>(0xE0 | (c >> 12));
      buf[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      buf[2] = static_cast<char>(0x80 | (c & 0x3F));
      len = 3;
    } else {
      if (c > 0x10FFFF) c = 0xFFFD;
      buf[0] = static_cast<char>(0xF0 | (c >> 18));
      buf[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      buf[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      buf[3] = static_cast<char>(0x80 | (c & 0x3F));
      len = 4;
    }
    if (n + len > size) break;
    memcpy(out + n, buf, len);
    n += len;
  }
  return n;
}

void Emit(format::PhaseKind kind, const char* name, uint64_t range_id, uint32_t domain) {
  RecordPhase(static_cast<uint32_t>(kind), name, name != nullptr ? strnlen(name, kMaxNameBytes) : 0, range_id,
              domain);
}

void EmitWide(format::PhaseKind kind, const wchar_t* name, uint64_t range_id, uint32_t domain) {
  char utf8[kMaxNameBytes];
  size_t n = WideToUtf8(name, utf8, sizeof(utf8));
  RecordPhase(static_cast<uint32_t>(kind), utf8, n, range_id, domain);
}

// The message of an event attribute structure, whatever its type.
void EmitAttributes(format::PhaseKind kind, const nvtxEventAttributes_t* attributes, uint64_t range_id,
                    uint32_t domain) {
  if (attributes == nullptr) return Emit(kind, nullptr, range_id, domain);
  switch (attributes->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return Emit(kind, attributes->message.ascii, range_id, domain);
    case NVTX_MESSAGE_TYPE_UNICODE:
      return EmitWide(kind, attributes->message.unicode, range_id, domain);
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      const auto* s = reinterpret_cast<const RegisteredString*>(attributes->message.registered);
      if (s == nullptr) return Emit(kind, nullptr, range_id, domain);
      RecordPhase(static_cast<uint32_t>(kind), s->bytes, s->size, range_id, domain);
      return;
    }
    default:
      return Emit(kind, nullptr, range_id, domain);
  }
}

uint32_t DomainId(nvtxDomainHandle_t domain) {
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(domain));
}

nvtxStringHandle_t RegisterBytes(const char* bytes, size_t size) {
  size_t need = (offsetof(RegisteredString, bytes) + size + 1 + 7) & ~size_t{7};
  size_t at = g_arena_used.fetch_add(need, std::memory_order_relaxed);
  if (at + need > kArenaBytes) return reinterpret_cast<nvtxStringHandle_t>(&g_empty_string);
  auto* s = reinterpret_cast<RegisteredString*>(g_arena + at);
  s->size = static_cast<uint32_t>(size);
  memcpy(s->bytes, bytes, size);
  s->bytes[size] = '\0';
  return reinterpret_cast<nvtxStringHandle_t>(s);
}

// Core module.
void NVTX_API MarkA(const char* message) { Emit(format::PhaseKind::kMark, message, 0, 0); }
void NVTX_API MarkW(const wchar_t* message) { EmitWide(format::PhaseKind::kMark, message, 0, 0); }
void NVTX_API MarkEx(const nvtxEventAttributes_t* a) { EmitAttributes(format::PhaseKind::kMark, a, 0, 0); }

nvtxRangeId_t NVTX_API RangeStartA(const char* message) {
  uint64_t id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  Emit(format::PhaseKind::kStart, message, id, 0);
  return id;
}
nvtxRangeId_t NVTX_API RangeStartW(const wchar_t* message) {
  uint64_t id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  EmitWide(format::PhaseKind::kStart, message, id, 0);
  return id;
}
nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* a) {
  uint64_t id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  EmitAttributes(format::PhaseKind::kStart, a, id, 0);
  return id;
}
void NVTX_API RangeEnd(nvtxRangeId_t id) { Emit(format::PhaseKind::kEnd, nullptr, id, 0); }

int NVTX_API RangePushA(const char* message) {
  Emit(format::PhaseKind::kPush, message, 0, 0);
  return t_depth++;
}
int NVTX_API RangePushW(const wchar_t* message) {
  EmitWide(format::PhaseKind::kPush, message, 0, 0);
  return t_depth++;
}
int NVTX_API RangePushEx(const nvtxEventAttributes_t* a) {
  EmitAttributes(format::PhaseKind::kPush, a, 0, 0);
  return t_depth++;
}
int NVTX_API RangePop() {
  if (t_depth == 0) return -1;  // NVTX: a pop without a push is an error, and nothing was opened
  Emit(format::PhaseKind::kPop, nullptr, 0, 0);
  return --t_depth;
}

// Core2 module (domains).
void NVTX_API DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  EmitAttributes(format::PhaseKind::kMark, a, 0, DomainId(d));
}
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  uint64_t id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  EmitAttributes(format::PhaseKind::kStart, a, id, DomainId(d));
  return id;
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) {
  Emit(format::PhaseKind::kEnd, nullptr, id, DomainId(d));
}
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  EmitAttributes(format::PhaseKind::kPush, a, 0, DomainId(d));
  return t_depth++;
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t d) {
  if (t_depth == 0) return -1;
  Emit(format::PhaseKind::kPop, nullptr, 0, DomainId(d));
  return --t_depth;
}
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t, const char* text) {
  return RegisterBytes(text != nullptr ? text : "", text != nullptr ? strnlen(text, kMaxNameBytes) : 0);
}
nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t, const wchar_t* text) {
  char utf8[kMaxNameBytes];
  return RegisterBytes(utf8, WideToUtf8(text, utf8, sizeof(utf8)));
}
nvtxDomainHandle_t NVTX_API DomainCreateA(const char*) {
  return reinterpret_cast<nvtxDomainHandle_t>(
      static_cast<uintptr_t>(g_next_domain.fetch_add(1, std::memory_order_relaxed)));
}
nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t*) { return DomainCreateA(nullptr); }
void NVTX_API DomainDestroy(nvtxDomainHandle_t) {}

template <typename F>
void Patch(NvtxFunctionTable table, unsigned int size, unsigned int id, F function) {
  if (id < size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
}

bool PatchModules(NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      callbacks->GetModuleFunctionTable == nullptr) {
    return false;
  }
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) == 0 || table == nullptr) return false;
  Patch(table, size, NVTX_CBID_CORE_MarkEx, MarkEx);
  Patch(table, size, NVTX_CBID_CORE_MarkA, MarkA);
  Patch(table, size, NVTX_CBID_CORE_MarkW, MarkW);
  Patch(table, size, NVTX_CBID_CORE_RangeStartEx, RangeStartEx);
  Patch(table, size, NVTX_CBID_CORE_RangeStartA, RangeStartA);
  Patch(table, size, NVTX_CBID_CORE_RangeStartW, RangeStartW);
  Patch(table, size, NVTX_CBID_CORE_RangeEnd, RangeEnd);
  Patch(table, size, NVTX_CBID_CORE_RangePushEx, RangePushEx);
  Patch(table, size, NVTX_CBID_CORE_RangePushA, RangePushA);
  Patch(table, size, NVTX_CBID_CORE_RangePushW, RangePushW);
  Patch(table, size, NVTX_CBID_CORE_RangePop, RangePop);
  table = nullptr;
  size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) != 0 && table != nullptr) {
    Patch(table, size, NVTX_CBID_CORE2_DomainMarkEx, DomainMarkEx);
    Patch(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, DomainRangeStartEx);
    Patch(table, size, NVTX_CBID_CORE2_DomainRangeEnd, DomainRangeEnd);
    Patch(table, size, NVTX_CBID_CORE2_DomainRangePushEx, DomainRangePushEx);
    Patch(table, size, NVTX_CBID_CORE2_DomainRangePop, DomainRangePop);
    Patch(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, DomainRegisterStringA);
    Patch(table, size, NVTX_CBID_CORE2_DomainRegisterStringW, DomainRegisterStringW);
    Patch(table, size, NVTX_CBID_CORE2_DomainCreateA, DomainCreateA);
    Patch(table, size, NVTX_CBID_CORE2_DomainCreateW, DomainCreateW);
    Patch(table, size, NVTX_CBID_CORE2_DomainDestroy, DomainDestroy);
  }
  return true;
}

}  // namespace
}  // namespace cumemtrace::preload

// NVTX's entry point, once per NVTX instance. Returns 1 (attached) or 0 (declined: NVTX unloads nothing of ours,
// since the preload is already loaded, and makes its calls no-ops).
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  const char* nvtx = getenv("CUMEMTRACE_NVTX");
  if (nvtx != nullptr && strcmp(nvtx, "0") == 0) return 0;
  if (get_table == nullptr) return 0;
  return cumemtrace::preload::PatchModules(get_table) ? 1 : 0;
}
