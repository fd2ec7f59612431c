#include "preload/driver_hooks.h"

#include <cuda.h>
#include <string.h>

#include <atomic>

#include "preload/driver_helpers.h"
#include "preload/log.h"
#include "preload/module_map.h"
#include "preload/recorder.h"
#include "preload/symbol_resolver.h"

// cuda.h maps cuGetProcAddress to cuGetProcAddress_v2; this file defines both exported symbols itself.
#undef cuGetProcAddress

#include "preload/driver_hook_list.h"

#define CUMEMTRACE_EXPORT extern "C" __attribute__((visibility("default")))
#define CUMEMTRACE_UNPACK(...) __VA_ARGS__

namespace cumemtrace::preload {
namespace {

using format::Api;
using format::Op;

// Wrappers per hooked function: slot 0 is the exported symbol (its real function is the next definition of that
// symbol); the others are bound to pointers handed out by dlsym and cuGetProcAddress.
constexpr int kSlots = 6;

struct HookSite {
  const char* symbol;
  const char* base;
  int min_version;
  int max_version;
  void* wrappers[kSlots];
  std::atomic<void*> reals[kSlots];
};

enum SiteId {
#define CUMEMTRACE_SITE_ID(id, symbol, base, minv, maxv, params, args) k##id,
  CUMEMTRACE_DRIVER_HOOKS(CUMEMTRACE_SITE_ID)
#undef CUMEMTRACE_SITE_ID
  kNumSites
};

extern HookSite g_sites[kNumSites];

// The real function behind slot `slot` of `site`, resolving slot 0 lazily.
void* Real(SiteId site, int slot) {
  HookSite& s = g_sites[site];
  void* real = s.reals[slot].load(std::memory_order_acquire);
  if (real == nullptr && slot == 0) {
    real = ResolveNext(s.symbol, "libcuda.so");
    if (real != nullptr) {
      s.reals[0].store(real, std::memory_order_release);
      LearnDriverFrom(real);
    }
  }
  return real;
}

CUresult MissingReal(const char* symbol) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) Warn("no real %s found in this process; the call fails with CUDA_ERROR_NOT_FOUND", symbol);
  return CUDA_ERROR_NOT_FOUND;
}

// One hooked driver call. Decides whether it is a user call to record (not cumemtrace's own, not a driver call
// made inside another hooked driver call) and tracks the nesting.
class DriverCall {
 public:
  DriverCall() : self_(Self()) {
    record_ = self_.driver_depth == 0 && self_.in_recorder == 0 && Tracing();
    ++self_.driver_depth;
  }
  ~DriverCall() { --self_.driver_depth; }
  DriverCall(const DriverCall&) = delete;
  DriverCall& operator=(const DriverCall&) = delete;

  bool record() const { return record_; }

  // The api to record: the outermost runtime call's label, once, when it is of the same op; else the driver's.
  // For frees, also the sequence number (the runtime hook's, taken before its real call, else a fresh one): it
  // must be taken before the real free.
  Api Label(Api driver_api, Op op, uint64_t* seq) {
    Api api = driver_api;
    if (self_.label != Api::kUnknown && !self_.label_used && self_.label_op == op) {
      self_.label_used = true;
      api = self_.label;
      if (op == Op::kFree) *seq = self_.label_seq;
    }
    if (op == Op::kFree && *seq == 0) *seq = TakeSequence();
    return api;
  }

 private:
  ThreadState& self_;
  bool record_;
};

// Records an allocation after its real call. `device` < -1 means "ask the driver".
void RecordAlloc(DriverCall& call, Api driver_api, CUresult result, uint64_t address, uint64_t size,
                 int32_t device, uint64_t stream = 0, uint64_t aux = 0) {
  uint64_t seq = 0;
  CallRecord r;
  r.api = call.Label(driver_api, Op::kAlloc, &seq);
  r.address = result == CUDA_SUCCESS ? address : 0;
  r.size = size;
  r.stream = stream;
  r.aux = aux;
  r.device = device;
  r.device_known = device >= -1;
  r.result = result;
  Record(r);
}

constexpr int32_t kAskDriver = -2;
constexpr int32_t kHost = format::kHostDevice;

// Runs a free: sequence number first, then the real call, then the record.
template <typename Fn>
CUresult TracedFree(Api driver_api, uint64_t address, uint64_t stream, Fn real_call) {
  DriverCall call;
  if (!call.record() || address == 0) return real_call();
  uint64_t seq = 0;
  Api api = call.Label(driver_api, Op::kFree, &seq);
  CUresult result = real_call();
  CallRecord r;
  r.api = api;
  r.address = address;
  r.stream = stream;
  r.result = result;
  r.seq = seq;
  Record(r);
  return result;
}

// ---- Handlers: what each hooked function records. `real` is the exact function the wrapper is bound to.

using MemAllocFn = CUresult (*)(CUdeviceptr*, size_t);
using MemAllocPitchFn = CUresult (*)(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
using MemAllocManagedFn = CUresult (*)(CUdeviceptr*, size_t, unsigned int);
using MemAllocHostFn = CUresult (*)(void**, size_t);
using MemHostAllocFn = CUresult (*)(void**, size_t, unsigned int);
using MemHostRegisterFn = CUresult (*)(void*, size_t, unsigned int);
using MemAllocAsyncFn = CUresult (*)(CUdeviceptr*, size_t, CUstream);
using MemAllocAsyncPtszFn = MemAllocAsyncFn;
using MemAllocFromPoolAsyncFn = CUresult (*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
using MemAllocFromPoolAsyncPtszFn = MemAllocFromPoolAsyncFn;
using MemCreateFn = CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                                 unsigned long long);
using MemAddressReserveFn = CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
using MemMapFn = CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
using MemFreeFn = CUresult (*)(CUdeviceptr);
using MemFreeHostFn = CUresult (*)(void*);
using MemHostUnregisterFn = CUresult (*)(void*);
using MemFreeAsyncFn = CUresult (*)(CUdeviceptr, CUstream);
using MemFreeAsyncPtszFn = MemFreeAsyncFn;
using MemReleaseFn = CUresult (*)(CUmemGenericAllocationHandle);
using MemAddressFreeFn = CUresult (*)(CUdeviceptr, size_t);
using MemUnmapFn = CUresult (*)(CUdeviceptr, size_t);
using GetProcAddressLegacyFn = CUresult (*)(const char*, void**, int, cuuint64_t);
using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

uint64_t Ptr(const void* p) { return reinterpret_cast<uintptr_t>(p); }
uint64_t Stream(CUstream s) { return reinterpret_cast<uintptr_t>(s); }

CUresult HandleMemAlloc(MemAllocFn real, CUdeviceptr* dptr, size_t bytesize) {
  DriverCall call;
  CUresult r = real(dptr, bytesize);
  if (call.record()) RecordAlloc(call, Api::kCuMemAlloc, r, dptr != nullptr ? *dptr : 0, bytesize, kAskDriver);
  return r;
}

CUresult HandleMemAllocPitch(MemAllocPitchFn real, CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                             unsigned int element) {
  DriverCall call;
  CUresult r = real(dptr, pitch, width, height, element);
  if (call.record()) {
    uint64_t size = r == CUDA_SUCCESS && pitch != nullptr ? static_cast<uint64_t>(*pitch) * height
                                                          : static_cast<uint64_t>(width) * height;
    RecordAlloc(call, Api::kCuMemAllocPitch, r, dptr != nullptr ? *dptr : 0, size, kAskDriver);
  }
  return r;
}

CUresult HandleMemAllocManaged(MemAllocManagedFn real, CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  DriverCall call;
  CUresult r = real(dptr, bytesize, flags);
  if (call.record()) {
    RecordAlloc(call, Api::kCuMemAllocManaged, r, dptr != nullptr ? *dptr : 0, bytesize, kAskDriver);
  }
  return r;
}

CUresult HandleMemAllocHost(MemAllocHostFn real, void** pp, size_t bytesize) {
  DriverCall call;
  CUresult r = real(pp, bytesize);
  if (call.record()) RecordAlloc(call, Api::kCuMemAllocHost, r, pp != nullptr ? Ptr(*pp) : 0, bytesize, kHost);
  return r;
}

CUresult HandleMemHostAlloc(MemHostAllocFn real, void** pp, size_t bytesize, unsigned int flags) {
  DriverCall call;
  CUresult r = real(pp, bytesize, flags);
  if (call.record()) RecordAlloc(call, Api::kCuMemHostAlloc, r, pp != nullptr ? Ptr(*pp) : 0, bytesize, kHost);
  return r;
}

CUresult HandleMemHostRegister(MemHostRegisterFn real, void* p, size_t bytesize, unsigned int flags) {
  DriverCall call;
  CUresult r = real(p, bytesize, flags);
  if (call.record()) RecordAlloc(call, Api::kCuMemHostRegister, r, Ptr(p), bytesize, kHost);
  return r;
}

CUresult HandleMemAllocAsync(MemAllocAsyncFn real, CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  DriverCall call;
  CUresult r = real(dptr, bytesize, stream);
  if (call.record()) {
    RecordAlloc(call, Api::kCuMemAllocAsync, r, dptr != nullptr ? *dptr : 0, bytesize, kAskDriver, Stream(stream));
  }
  return r;
}
CUresult HandleMemAllocAsyncPtsz(MemAllocAsyncFn real, CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  return HandleMemAllocAsync(real, dptr, bytesize, stream);
}

CUresult HandleMemAllocFromPoolAsync(MemAllocFromPoolAsyncFn real, CUdeviceptr* dptr, size_t bytesize,
                                     CUmemoryPool pool, CUstream stream) {
  DriverCall call;
  CUresult r = real(dptr, bytesize, pool, stream);
  if (call.record()) {
    RecordAlloc(call, Api::kCuMemAllocFromPoolAsync, r, dptr != nullptr ? *dptr : 0, bytesize, kAskDriver,
                Stream(stream));
  }
  return r;
}
CUresult HandleMemAllocFromPoolAsyncPtsz(MemAllocFromPoolAsyncFn real, CUdeviceptr* dptr, size_t bytesize,
                                         CUmemoryPool pool, CUstream stream) {
  return HandleMemAllocFromPoolAsync(real, dptr, bytesize, pool, stream);
}

CUresult HandleMemCreate(MemCreateFn real, CUmemGenericAllocationHandle* handle, size_t size,
                         const CUmemAllocationProp* prop, unsigned long long flags) {
  DriverCall call;
  CUresult r = real(handle, size, prop, flags);
  if (call.record()) {
    int32_t device = kAskDriver;
    if (prop != nullptr) device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : kHost;
    RecordAlloc(call, Api::kCuMemCreate, r, handle != nullptr ? *handle : 0, size, device);
  }
  return r;
}

CUresult HandleMemAddressReserve(MemAddressReserveFn real, CUdeviceptr* ptr, size_t size, size_t alignment,
                                 CUdeviceptr addr, unsigned long long flags) {
  DriverCall call;
  CUresult r = real(ptr, size, alignment, addr, flags);
  if (call.record()) RecordAlloc(call, Api::kCuMemAddressReserve, r, ptr != nullptr ? *ptr : 0, size, kAskDriver);
  return r;
}

CUresult HandleMemMap(MemMapFn real, CUdeviceptr ptr, size_t size, size_t offset,
                      CUmemGenericAllocationHandle handle, unsigned long long flags) {
  DriverCall call;
  CUresult r = real(ptr, size, offset, handle, flags);
  if (call.record()) RecordAlloc(call, Api::kCuMemMap, r, ptr, size, kAskDriver, 0, handle);
  return r;
}

CUresult HandleMemFree(MemFreeFn real, CUdeviceptr dptr) {
  return TracedFree(Api::kCuMemFree, dptr, 0, [&] { return real(dptr); });
}
CUresult HandleMemFreeHost(MemFreeHostFn real, void* p) {
  return TracedFree(Api::kCuMemFreeHost, Ptr(p), 0, [&] { return real(p); });
}
CUresult HandleMemHostUnregister(MemHostUnregisterFn real, void* p) {
  return TracedFree(Api::kCuMemHostUnregister, Ptr(p), 0, [&] { return real(p); });
}
CUresult HandleMemFreeAsync(MemFreeAsyncFn real, CUdeviceptr dptr, CUstream stream) {
  return TracedFree(Api::kCuMemFreeAsync, dptr, Stream(stream), [&] { return real(dptr, stream); });
}
CUresult HandleMemFreeAsyncPtsz(MemFreeAsyncFn real, CUdeviceptr dptr, CUstream stream) {
  return HandleMemFreeAsync(real, dptr, stream);
}
CUresult HandleMemRelease(MemReleaseFn real, CUmemGenericAllocationHandle handle) {
  return TracedFree(Api::kCuMemRelease, handle, 0, [&] { return real(handle); });
}
CUresult HandleMemAddressFree(MemAddressFreeFn real, CUdeviceptr ptr, size_t size) {
  return TracedFree(Api::kCuMemAddressFree, ptr, 0, [&] { return real(ptr, size); });
}
CUresult HandleMemUnmap(MemUnmapFn real, CUdeviceptr ptr, size_t size) {
  return TracedFree(Api::kCuMemUnmap, ptr, 0, [&] { return real(ptr, size); });
}

// cuGetProcAddress: nothing to record; the pointer it hands out is replaced by a wrapper.
CUresult HandleGetProcAddressLegacy(GetProcAddressLegacyFn real, const char* symbol, void** pfn, int version,
                                    cuuint64_t flags) {
  CUresult r = real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr && symbol != nullptr) {
    *pfn = WrapDriverEntryPoint(symbol, version, *pfn);
  }
  return r;
}

CUresult HandleGetProcAddress(GetProcAddressFn real, const char* symbol, void** pfn, int version, cuuint64_t flags,
                              CUdriverProcAddressQueryResult* status) {
  CUresult r = real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr && symbol != nullptr) {
    *pfn = WrapDriverEntryPoint(symbol, version, *pfn);
  }
  return r;
}

// ---- Wrappers: one instance per slot, each calling the real function bound to its slot.

#define CUMEMTRACE_WRAPPER(id, symbol, base, minv, maxv, params, args)                        \
  template <int kSlot>                                                                         \
  CUresult Wrap##id params {                                                                   \
    auto real = reinterpret_cast<id##Fn>(Real(k##id, kSlot));                                  \
    if (real == nullptr) return MissingReal(#symbol);                                          \
    return Handle##id(real, CUMEMTRACE_UNPACK args);                                           \
  }
CUMEMTRACE_DRIVER_HOOKS(CUMEMTRACE_WRAPPER)
#undef CUMEMTRACE_WRAPPER

}  // namespace
}  // namespace cumemtrace::preload

// ---- The exported symbols: slot 0 of each site.
#define CUMEMTRACE_EXPORTED(id, symbol, base, minv, maxv, params, args) \
  CUMEMTRACE_EXPORT CUresult symbol params { return cumemtrace::preload::Wrap##id<0> args; }
CUMEMTRACE_DRIVER_HOOKS(CUMEMTRACE_EXPORTED)
#undef CUMEMTRACE_EXPORTED

namespace cumemtrace::preload {
namespace {

#define CUMEMTRACE_SITE(id, symbol, base, minv, maxv, params, args)                                      \
  {#symbol,                                                                                              \
   base,                                                                                                 \
   minv,                                                                                                 \
   maxv,                                                                                                 \
   {reinterpret_cast<void*>(&::symbol), reinterpret_cast<void*>(&Wrap##id<1>),                           \
    reinterpret_cast<void*>(&Wrap##id<2>), reinterpret_cast<void*>(&Wrap##id<3>),                        \
    reinterpret_cast<void*>(&Wrap##id<4>), reinterpret_cast<void*>(&Wrap##id<5>)},                       \
   {}},
HookSite g_sites[kNumSites] = {CUMEMTRACE_DRIVER_HOOKS(CUMEMTRACE_SITE)};
#undef CUMEMTRACE_SITE
static_assert(kSlots == 6, "CUMEMTRACE_SITE lists six wrappers");

// The wrapper bound to `real` in `site`: an existing slot, else a free one. Returns `real` when all are taken.
void* BindSlot(SiteId site, void* real) {
  HookSite& s = g_sites[site];
  Real(site, 0);  // so that a pointer equal to the exported symbol's real one maps to the exported hook
  for (int i = 0; i < kSlots; ++i) {
    if (s.reals[i].load(std::memory_order_acquire) == real) return s.wrappers[i];
  }
  for (int i = 1; i < kSlots; ++i) {
    void* expected = nullptr;
    if (s.reals[i].compare_exchange_strong(expected, real, std::memory_order_acq_rel)) {
      LearnDriverFrom(real);
      return s.wrappers[i];
    }
    if (expected == real) return s.wrappers[i];
  }
  NoteWrapperSlotsExhausted();
  return real;
}

}  // namespace

bool IsOwnFunction(const void* function) {
  return OwnModuleRange().Contains(reinterpret_cast<uintptr_t>(function));
}

void* WrapDriverSymbol(const char* symbol, void* real) {
  if (symbol == nullptr || real == nullptr || symbol[0] != 'c' || symbol[1] != 'u' || IsOwnFunction(real)) {
    return real;
  }
  for (int i = 0; i < kNumSites; ++i) {
    if (strcmp(g_sites[i].symbol, symbol) == 0) return BindSlot(static_cast<SiteId>(i), real);
  }
  return real;
}

void* WrapDriverEntryPoint(const char* name, int version, void* real) {
  if (name == nullptr || real == nullptr || IsOwnFunction(real)) return real;
  for (int i = 0; i < kNumSites; ++i) {
    const HookSite& s = g_sites[i];
    if (strcmp(s.base, name) == 0 && version >= s.min_version && version < s.max_version) {
      return BindSlot(static_cast<SiteId>(i), real);
    }
  }
  return real;
}

}  // namespace cumemtrace::preload
