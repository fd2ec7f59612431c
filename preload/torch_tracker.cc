#include "preload/torch_tracker.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atomic>

#include "preload/clock.h"
#include "preload/elf_symbols.h"
#include "preload/module_map.h"
#include "preload/recorder.h"
#include "preload/torch_grad_mode.h"
#include "preload/trace_writer.h"

namespace cumemtrace::preload {
namespace {

using format::Api;
using format::NoticeCode;

// The head of PyTorch's TraceEntry (c10/core/CachingDeviceAllocator.h in 2.11; c10/cuda/CUDACachingAllocator.h
// before): unchanged since 2.2. Only these fields are read; the first entry after the attach proves them.
struct TraceEntryHead {
  int32_t action;    // enum Action
  int8_t device;     // c10::DeviceIndex
  uint8_t padding[3];
  uint64_t address;  // for OOM: the device's free bytes as the allocator saw them
  void* context[2];  // std::shared_ptr<GatheredContext>, null unless memory history is recorded
  uint64_t stream;   // cudaStream_t
  uint64_t size;     // ALLOC: bytes requested; segments: their size; OOM: bytes requested
};
static_assert(offsetof(TraceEntryHead, address) == 8, "TraceEntry::addr_ is at 8");
static_assert(offsetof(TraceEntryHead, stream) == 32, "TraceEntry::stream_ is at 32");
static_assert(offsetof(TraceEntryHead, size) == 40, "TraceEntry::size_ is at 40");

// TraceEntry::Action, in PyTorch's order.
enum Action : int32_t {
  kAlloc, kFreeRequested, kFreeCompleted, kSegmentAlloc, kSegmentFree, kSegmentMap, kSegmentUnmap, kSnapshot, kOom
};

constexpr Api kApiOfAction[] = {Api::kTorchAlloc,        Api::kTorchFreeRequested, Api::kTorchFreeCompleted,
                                Api::kTorchSegmentAlloc, Api::kTorchSegmentFree,   Api::kTorchSegmentMap,
                                Api::kTorchSegmentUnmap, Api::kUnknown,            Api::kTorchOom};

// libstdc++'s std::function<void(const TraceEntry&)>: _Any_data (16 bytes), _M_manager, _M_invoker. The layout does
// not depend on the signature (<bits/std_function.h>); the mangled name of the method checks that it is libstdc++'s.
struct StdFunction {
  void* functor[2];
  bool (*manager)(void* dest, const void* source, int op);
  void (*invoker)(const void* functor, const void* entry);
};
static_assert(sizeof(StdFunction) == 32, "std::function is 32 bytes in libstdc++");
// _Manager_operation.
enum ManagerOp : int { kGetTypeInfo, kGetFunctorPtr, kCloneFunctor, kDestroyFunctor };

// The names looked up in libc10_cuda.so's .symtab. The method's name is matched by prefix and suffix: its
// parameter names TraceEntry in CUDACachingAllocator before 2.9 and in c10::CachingDeviceAllocator after.
constexpr char kAllocatorSymbol[] = "_ZN3c104cuda20CUDACachingAllocator9allocatorE";
constexpr char kNativeVtable[] = "_ZTVN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocatorE";
constexpr char kAsyncVtable[] =
    "_ZTVN3c104cuda20CUDACachingAllocator15CudaMallocAsync24CudaMallocAsyncAllocatorE";
constexpr char kAttachPrefix[] =
    "_ZN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocator27attachAllocatorTraceTrackerESt8functionIFvRK";
constexpr char kAttachSuffix[] = "10TraceEntryEEE";

struct FoundSymbols {
  uint64_t allocator = 0;
  uint64_t native_vtable = 0, native_vtable_size = 0;
  uint64_t async_vtable = 0, async_vtable_size = 0;
  uint64_t attach = 0;
};

void Visit(const char* name, uint64_t address, uint64_t size, void* context) {
  auto* found = static_cast<FoundSymbols*>(context);
  if (name[0] != '_' || name[1] != 'Z') return;
  if (strcmp(name, kAllocatorSymbol) == 0) {
    found->allocator = address;
  } else if (strcmp(name, kNativeVtable) == 0) {
    found->native_vtable = address;
    found->native_vtable_size = size;
  } else if (strcmp(name, kAsyncVtable) == 0) {
    found->async_vtable = address;
    found->async_vtable_size = size;
  } else if (strncmp(name, kAttachPrefix, sizeof(kAttachPrefix) - 1) == 0) {
    size_t n = strlen(name), suffix = sizeof(kAttachSuffix) - 1;
    if (n > suffix && strcmp(name + n - suffix, kAttachSuffix) == 0) found->attach = address;
  }
}

enum State : int { kIdle, kAttaching, kAttached, kGaveUp };
std::atomic<int> g_state{kIdle};
std::atomic<uint32_t> g_copies{0};
// Whether trace entries are kept: unchecked until the attaching thread's first entry proved the layout.
enum Entries : int { kUnchecked, kKeep, kIgnore };
std::atomic<int> g_entries{kUnchecked};
__thread bool t_attaching __attribute__((tls_model("initial-exec")));

// The allocation that triggered the attach: the first entry must describe it.
format::Kind g_expected_kind;
uint64_t g_expected_address, g_expected_size;

size_t g_next_module = 0;      // modules below this index are known not to be libc10_cuda.so
bool g_c10_seen = false;       // libc10_cuda.so was loaded at some point
bool g_first_attempt = true;   // no attach was tried before (so no segment predates the tracker)

bool Manager(void* dest, const void* source, int op) {
  switch (op) {
    case kGetTypeInfo:  // built without RTTI, as libstdc++ does then
      *static_cast<const void**>(dest) = nullptr;
      break;
    case kGetFunctorPtr:
      *static_cast<const void**>(dest) = source;
      break;
    case kCloneFunctor:  // one copy per device allocator
      memcpy(dest, source, sizeof(StdFunction::functor));
      g_copies.fetch_add(1, std::memory_order_relaxed);
      break;
    default:  // kDestroyFunctor: nothing is owned
      break;
  }
  return false;
}

bool FirstEntryDescribesTheSegment(const TraceEntryHead& e) {
  if (g_expected_kind == format::Kind::kAddressReserve) {  // expandable segments: the first map inside the range
    return e.action == kSegmentMap && e.address >= g_expected_address &&
           e.address - g_expected_address < g_expected_size && e.size <= g_expected_size;
  }
  return e.action == kSegmentAlloc && e.address == g_expected_address && e.size == g_expected_size;
}

void OnTraceEntry(const void* /*functor*/, const void* raw) {
  if (!TracingStarted()) return;  // under PyTorch's allocator lock: never start tracing from here
  const TraceEntryHead& e = *static_cast<const TraceEntryHead*>(raw);
  int entries = g_entries.load(std::memory_order_acquire);
  if (entries == kUnchecked && t_attaching) {
    t_attaching = false;
    entries = FirstEntryDescribesTheSegment(e) ? kKeep : kIgnore;
    g_entries.store(entries, std::memory_order_release);
    if (entries == kIgnore) {
      NoteOnce(NoticeCode::kTorchAllocatorIgnored,
               "PyTorch's first allocator trace entry did not describe the segment it was allocating (unknown "
               "TraceEntry layout): its entries are ignored, the trace has segments only");
    }
  }
  if (entries == kIgnore) {
    NoteAllocatorIgnored();
    return;
  }
  if (e.action == kSnapshot) return;  // marks a memory snapshot, not memory
  if (e.action < kAlloc || e.action > kOom || e.device < 0) {
    NoteAllocatorIgnored();
    return;
  }
  CallRecord r;
  r.api = e.action == kAlloc ? TorchAllocApi() : kApiOfAction[e.action];
  r.device = e.device;
  r.device_known = true;
  r.stream = e.stream;
  r.size = e.size;
  if (e.action == kOom) {
    r.aux = e.address;
  } else {
    r.address = e.address;
  }
  Record(r);
}

// The allocator settings in force (PyTorch 2.9+ reads PYTORCH_ALLOC_CONF first).
const char* AllocatorConfig() {
  const char* config = getenv("PYTORCH_ALLOC_CONF");
  if (config == nullptr || config[0] == '\0') config = getenv("PYTORCH_CUDA_ALLOC_CONF");
  return config != nullptr ? config : "";
}

bool Within(uint64_t address, uint64_t start, uint64_t size) { return address >= start && address - start < size; }

// Does the attach. Returns the new state: kIdle to try again at the next segment (allocator not initialized).
int Attach(const ModuleEntry& c10, uint64_t seq) {
  const char* uncached = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
  if (uncached != nullptr && uncached[0] != '\0' && strcmp(uncached, "0") != 0) {
    NoteOnce(NoticeCode::kTorchAllocatorUnavailable,
             "PYTORCH_NO_CUDA_MEMORY_CACHING is set: every tensor is its own driver allocation, no block layer");
    return kGaveUp;
  }
  FoundSymbols found;
  ElfScan scan = ForEachElfSymbol(c10.path, Visit, &found);
  if (scan != ElfScan::kOk || found.allocator == 0 || found.native_vtable == 0 || found.attach == 0) {
    NoteOnce(NoticeCode::kTorchAllocatorUnavailable,
             scan == ElfScan::kNoFile    ? "libc10_cuda.so could not be read: no block layer (segments only)"
             : scan == ElfScan::kNoSymtab ? "libc10_cuda.so is stripped (no .symtab): no block layer (segments only)"
                                          : "libc10_cuda.so lacks the allocator symbols this version knows "
                                            "(unknown PyTorch layout): no block layer (segments only)");
    return kGaveUp;
  }
  const uint64_t bias = c10.load_bias;
  void* object = __atomic_load_n(reinterpret_cast<void**>(found.allocator + bias), __ATOMIC_ACQUIRE);
  if (object == nullptr) return kIdle;
  const uint64_t vptr = *static_cast<const uint64_t*>(object);
  if (found.async_vtable != 0 && Within(vptr, found.async_vtable + bias, found.async_vtable_size)) {
    NoteOnce(NoticeCode::kTorchAllocatorUnavailable,
             "PyTorch uses backend:cudaMallocAsync: every tensor is a pool allocation the driver hooks see, no block "
             "layer");
    return kGaveUp;
  }
  const uint64_t vtable = found.native_vtable + bias;
  const uint64_t method = found.attach + bias;
  uint64_t slot = 0;
  if (Within(vptr, vtable, found.native_vtable_size)) {
    for (uint64_t p = vptr; p + sizeof(uint64_t) <= vtable + found.native_vtable_size; p += sizeof(uint64_t)) {
      if (*reinterpret_cast<const uint64_t*>(p) == method) {
        slot = p;
        break;
      }
    }
  }
  if (slot == 0) {
    NoteOnce(NoticeCode::kTorchAllocatorUnavailable,
             "PyTorch's allocator is not the NativeCachingAllocator this version knows (another backend or an "
             "unknown layout): no block layer (segments only)");
    return kGaveUp;
  }
  // The call: exactly what PyTorch's own inline attachAllocatorTraceTracker does through that vtable slot. The
  // std::function is passed by invisible reference; PyTorch copies it once per device allocator.
  LearnGradMode(c10.path);  // before the first entry can arrive
  StdFunction tracker{{nullptr, nullptr}, Manager, OnTraceEntry};
  g_copies.store(0, std::memory_order_relaxed);
  using AttachFn = void (*)(void* self, StdFunction* tracker);
  reinterpret_cast<AttachFn>(*reinterpret_cast<const uint64_t*>(slot))(object, &tracker);
  uint32_t devices = g_copies.load(std::memory_order_relaxed);
  if (devices == 0) {  // attached to nothing: the per-device allocators do not exist yet
    g_first_attempt = false;
    return kIdle;
  }
  t_attaching = true;  // this thread's next entry is the segment being allocated: it proves the layout
  AllocatorAttachRecord attach{};
  attach.after_seq = seq;
  attach.time_ns = NowNs();
  attach.library = c10.path;
  attach.devices = devices;
  attach.config = AllocatorConfig();
  attach.at_first_segment = g_first_attempt;
  NoteAllocatorAttached(attach);
  return kAttached;
}

}  // namespace

void MaybeAttachTorchTracker(Api api, uint64_t seq, uint64_t address, uint64_t size, const uintptr_t* pcs,
                             int depth) {
  if (g_state.load(std::memory_order_acquire) != kIdle) return;
  const format::ApiInfo* info = format::FindApi(static_cast<uint32_t>(api));
  if (info == nullptr || (info->kind != format::Kind::kDevice && info->kind != format::Kind::kAddressReserve &&
                          info->kind != format::Kind::kPool)) {
    return;
  }
  ModuleEntry c10;
  if (!FindLoadedModule("libc10_cuda.so", &g_next_module, &c10)) return;
  g_c10_seen = true;
  bool from_c10 = false;
  for (int i = 0; i < depth && !from_c10; ++i) from_c10 = pcs[i] >= c10.start && pcs[i] < c10.end;
  if (!from_c10) return;
  int idle = kIdle;
  if (!g_state.compare_exchange_strong(idle, kAttaching, std::memory_order_acq_rel)) return;
  g_expected_kind = info->kind;
  g_expected_address = address;
  g_expected_size = size;
  g_state.store(Attach(c10, seq), std::memory_order_release);
}

bool TorchTrackerMayAttach() {
  if (g_state.load(std::memory_order_acquire) != kIdle) return false;
  // The first test MaybeAttachTorchTracker makes: without it, a program that is not PyTorch's, traced without
  // stacks, had each of its allocations unwound 32 frames deep for nothing.
  ModuleEntry c10;
  return FindLoadedModule("libc10_cuda.so", &g_next_module, &c10);
}

void NoteTorchTrackerAtEnd(bool wanted) {
  int state = g_state.load(std::memory_order_acquire);
  if (state == kAttached || state == kGaveUp) return;
  if (!wanted) {
    NoteOnce(NoticeCode::kTorchAllocatorUnavailable, "CUMEMTRACE_TORCH_BLOCKS=0: no block layer (segments only)");
    return;
  }
  size_t from_first = 0;
  ModuleEntry c10;
  if (FindLoadedModule("libc10_cuda.so", &from_first, &c10)) g_c10_seen = true;
  NoteOnce(NoticeCode::kTorchAllocatorUnavailable,
           g_c10_seen ? "PyTorch's caching allocator never allocated a segment while traced: no block layer"
                      : "no PyTorch caching allocator in this process (libc10_cuda.so not loaded): no block layer");
}

}  // namespace cumemtrace::preload
