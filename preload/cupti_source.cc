#include "preload/cupti_source.h"

#include <cupti.h>
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "preload/log.h"
#include "preload/recorder.h"
#include "preload/symbol_resolver.h"

namespace cumemtrace::preload {
namespace {

using format::Api;
using format::Op;

using SubscribeFn = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
using EnableCallbackFn = CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
using ResultStringFn = CUptiResult (*)(CUptiResult, const char**);

constexpr int32_t kAskDriver = -2;
constexpr int32_t kHost = format::kHostDevice;

// The driver callbacks enabled: the memory functions of format.h's api table (and their _ptsz twins).
constexpr CUpti_CallbackId kMemoryCallbacks[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,           CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,       CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,          CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,         CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,             CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,                CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,           CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,          CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,            CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
};

bool g_subscribed = false;  // written once, under the recorder's start lock

// A free's sequence number is taken at API enter, before the real free (as the hooks do); one per thread suffices
// since driver API calls of one thread do not nest as far as CUPTI reports them.
__thread uint64_t t_free_seq __attribute__((tls_model("initial-exec")));

uint64_t Ptr(const void* p) { return reinterpret_cast<uintptr_t>(p); }
uint64_t Stream(CUstream s) { return reinterpret_cast<uintptr_t>(s); }

// Fills `r` (api, address, size, stream, aux, device) from a memory callback's parameters. False for a callback
// this file does not know.
bool Describe(CUpti_CallbackId cbid, const void* params, CUresult result, CallRecord* r) {
  bool ok = result == CUDA_SUCCESS;
  r->device = kAskDriver;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      auto* p = static_cast<const cuMemAlloc_v2_params*>(params);
      r->api = Api::kCuMemAlloc;
      r->address = ok && p->dptr != nullptr ? *p->dptr : 0;
      r->size = p->bytesize;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      auto* p = static_cast<const cuMemAllocPitch_v2_params*>(params);
      r->api = Api::kCuMemAllocPitch;
      r->address = ok && p->dptr != nullptr ? *p->dptr : 0;
      r->size = ok && p->pPitch != nullptr ? static_cast<uint64_t>(*p->pPitch) * p->Height
                                           : static_cast<uint64_t>(p->WidthInBytes) * p->Height;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      auto* p = static_cast<const cuMemAllocManaged_params*>(params);
      r->api = Api::kCuMemAllocManaged;
      r->address = ok && p->dptr != nullptr ? *p->dptr : 0;
      r->size = p->bytesize;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
      auto* p = static_cast<const cuMemAllocHost_v2_params*>(params);
      r->api = Api::kCuMemAllocHost;
      r->address = ok && p->pp != nullptr ? Ptr(*p->pp) : 0;
      r->size = p->bytesize;
      r->device = kHost;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
      auto* p = static_cast<const cuMemHostAlloc_params*>(params);
      r->api = Api::kCuMemHostAlloc;
      r->address = ok && p->pp != nullptr ? Ptr(*p->pp) : 0;
      r->size = p->bytesize;
      r->device = kHost;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2: {
      auto* p = static_cast<const cuMemHostRegister_v2_params*>(params);
      r->api = Api::kCuMemHostRegister;
      r->address = ok ? Ptr(p->p) : 0;
      r->size = p->bytesize;
      r->device = kHost;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      auto* p = static_cast<const cuMemAllocAsync_params*>(params);  // the _ptsz struct has the same members
      r->api = Api::kCuMemAllocAsync;
      r->address = ok && p->dptr != nullptr ? *p->dptr : 0;
      r->size = p->bytesize;
      r->stream = Stream(p->hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      auto* p = static_cast<const cuMemAllocFromPoolAsync_params*>(params);
      r->api = Api::kCuMemAllocFromPoolAsync;
      r->address = ok && p->dptr != nullptr ? *p->dptr : 0;
      r->size = p->bytesize;
      r->stream = Stream(p->hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      auto* p = static_cast<const cuMemCreate_params*>(params);
      r->api = Api::kCuMemCreate;
      r->address = ok && p->handle != nullptr ? *p->handle : 0;
      r->size = p->size;
      if (p->prop != nullptr) {
        r->device = p->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? p->prop->location.id : kHost;
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
      auto* p = static_cast<const cuMemAddressReserve_params*>(params);
      r->api = Api::kCuMemAddressReserve;
      r->address = ok && p->ptr != nullptr ? *p->ptr : 0;
      r->size = p->size;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      auto* p = static_cast<const cuMemMap_params*>(params);
      r->api = Api::kCuMemMap;
      r->address = ok ? p->ptr : 0;
      r->size = p->size;
      r->aux = p->handle;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      r->api = Api::kCuMemFree;
      r->address = static_cast<const cuMemFree_v2_params*>(params)->dptr;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
      r->api = Api::kCuMemFreeHost;
      r->address = Ptr(static_cast<const cuMemFreeHost_params*>(params)->p);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister:
      r->api = Api::kCuMemHostUnregister;
      r->address = Ptr(static_cast<const cuMemHostUnregister_params*>(params)->p);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
      auto* p = static_cast<const cuMemFreeAsync_params*>(params);
      r->api = Api::kCuMemFreeAsync;
      r->address = p->dptr;
      r->stream = Stream(p->hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
      r->api = Api::kCuMemRelease;
      r->address = static_cast<const cuMemRelease_params*>(params)->handle;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree:
      r->api = Api::kCuMemAddressFree;
      r->address = static_cast<const cuMemAddressFree_params*>(params)->ptr;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap:
      r->api = Api::kCuMemUnmap;
      r->address = static_cast<const cuMemUnmap_params*>(params)->ptr;
      break;
    default:
      return false;
  }
  r->device_known = r->device >= -1;
  if (!r->device_known) r->device = 0;
  return true;
}

// True when interposition is not inside this call on this thread: no hooked driver call in progress, no runtime
// call whose label will produce the event, and not cumemtrace's own call.
bool InterpositionMissedIt() {
  const ThreadState& self = Self();
  return self.driver_depth == 0 && self.in_recorder == 0 && self.label == Api::kUnknown;
}

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbdata == nullptr || !InterpositionMissedIt()) return;
  const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
  if (data->functionParams == nullptr) return;
  bool exit = data->callbackSite == CUPTI_API_EXIT;
  // At enter nothing has been returned yet: a result other than success keeps Describe off the output pointers.
  CUresult result = !exit                                ? CUDA_ERROR_NOT_READY
                    : data->functionReturnValue != nullptr ? *static_cast<const CUresult*>(data->functionReturnValue)
                                                           : CUDA_SUCCESS;
  CallRecord r;
  if (!Describe(cbid, data->functionParams, result, &r)) return;
  const format::ApiInfo* info = format::FindApi(static_cast<uint32_t>(r.api));
  bool is_free = info != nullptr && info->op == Op::kFree;
  if (!exit) {
    // Frees take their number before the real free, so that a reuse on another thread orders after it.
    if (is_free) t_free_seq = Tracing() ? TakeSequence() : 0;
    return;
  }
  uint64_t free_seq = t_free_seq;
  t_free_seq = 0;
  if (!Tracing() || (is_free && r.address == 0)) {  // a null free does nothing; the hooks do not record it either
    if (free_seq != 0) ReleaseSequence(free_seq);
    return;
  }
  if (is_free) {
    r.seq = free_seq != 0 ? free_seq : TakeSequence();
  }
  r.result = result;
  r.cupti_only = true;
  Record(r);
}

// Finds a libcupti.so* the process already has loaded.
int FindLoaded(dl_phdr_info* info, size_t, void* out) {
  const char* path = info->dlpi_name;
  if (path == nullptr || path[0] == '\0') return 0;
  const char* base = strrchr(path, '/');
  base = base != nullptr ? base + 1 : path;
  if (strncmp(base, "libcupti.so", 11) != 0) return 0;
  size_t n = strlen(path);
  if (n >= 1024) return 0;
  memcpy(out, path, n + 1);
  return 1;
}

// Appends `dir` + "/" + `file` into `out` (size 1024); false if it does not fit.
bool JoinPath(const char* dir, const char* file, char* out) {
  size_t a = strlen(dir), b = strlen(file);
  if (a + 1 + b >= 1024) return false;
  memcpy(out, dir, a);
  out[a] = '/';
  memcpy(out + a + 1, file, b + 1);
  return true;
}

// The CUPTI the process already has, else one found by name (the loader's search path), else in $CUDA_HOME's and
// /usr/local/cuda's extras/CUPTI/lib64.
void* OpenCupti() {
  static const char* const kNames[] = {"libcupti.so.13", "libcupti.so"};
  char path[1024] = "";
  dl_iterate_phdr(FindLoaded, path);
  if (path[0] != '\0') {
    void* handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (handle != nullptr) return handle;
  }
  for (const char* name : kNames) {
    void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) return handle;
  }
  const char* roots[] = {getenv("CUDA_HOME"), "/usr/local/cuda"};
  char dir[1024];
  for (const char* root : roots) {
    if (root == nullptr || root[0] == '\0' || !JoinPath(root, "extras/CUPTI/lib64", dir)) continue;
    for (const char* name : kNames) {
      if (!JoinPath(dir, name, path)) continue;
      void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) return handle;
    }
  }
  return nullptr;
}

void SetReason(char* why, size_t why_size, const char* what, const char* detail) {
  size_t used = 0;
  const char* pieces[] = {what, detail};
  for (const char* piece : pieces) {
    if (piece == nullptr) continue;
    size_t n = strlen(piece);
    if (used + n >= why_size) n = why_size - 1 - used;
    memcpy(why + used, piece, n);
    used += n;
  }
  why[used] = '\0';
}

}  // namespace

bool StartCupti(char* why, size_t why_size) {
  if (g_subscribed) return true;
  void* handle = OpenCupti();
  if (handle == nullptr) {
    SetReason(why, why_size, "libcupti.so could not be loaded: ", dlerror());
    return false;
  }
  DlsymFn dlsym_real = RealDlsym();
  auto subscribe = reinterpret_cast<SubscribeFn>(dlsym_real(handle, "cuptiSubscribe"));
  auto enable = reinterpret_cast<EnableCallbackFn>(dlsym_real(handle, "cuptiEnableCallback"));
  auto result_string = reinterpret_cast<ResultStringFn>(dlsym_real(handle, "cuptiGetResultString"));
  if (subscribe == nullptr || enable == nullptr) {
    SetReason(why, why_size, "libcupti.so lacks cuptiSubscribe or cuptiEnableCallback", nullptr);
    return false;
  }
  CUpti_SubscriberHandle subscriber = nullptr;
  CUptiResult result = subscribe(&subscriber, OnCallback, nullptr);
  if (result != CUPTI_SUCCESS) {
    const char* name = nullptr;
    if (result_string == nullptr || result_string(result, &name) != CUPTI_SUCCESS) name = nullptr;
    char code[16];
    FormatDecimal(result, code, sizeof(code));
    SetReason(why, why_size, "cuptiSubscribe failed: ", name != nullptr ? name : code);
    return false;
  }
  for (CUpti_CallbackId cbid : kMemoryCallbacks) {
    // A driver older than some api has no callback for it: that one failing is not a reason to give up.
    enable(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
  }
  g_subscribed = true;
  return true;
}

}  // namespace cumemtrace::preload
