// Runtime-API hooks (cudaMalloc, cudaHostAlloc, ...). They do not count memory: the driver hooks do, since every
// runtime allocation reaches the driver. They only label the outermost user call, so that one cudaMalloc is one
// event named cudaMalloc, and they record the call themselves only when no driver event happened inside it (a
// runtime that reached the driver some way we do not see). Also here: cudaGetDriverEntryPoint*, whose pointers
// are wrapped like cuGetProcAddress's.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>

#include "preload/driver_hooks.h"
#include "preload/log.h"
#include "preload/recorder.h"
#include "preload/symbol_resolver.h"

#undef cudaGetDriverEntryPoint
#undef cudaGetDriverEntryPointByVersion

#define CUMEMTRACE_EXPORT extern "C" __attribute__((visibility("default")))

namespace cumemtrace::preload {
namespace {

using format::Api;
using format::Op;

// Lazily resolved real runtime function.
template <typename Fn>
class RuntimeFunction {
 public:
  explicit constexpr RuntimeFunction(const char* symbol) : symbol_(symbol) {}
  Fn get() {
    void* p = real_.load(std::memory_order_acquire);
    if (p == nullptr) {
      p = ResolveNext(symbol_, "libcudart.so");
      if (p == nullptr) {
        Warn("no real %s found in this process; the call fails with cudaErrorInitializationError", symbol_);
      }
      real_.store(p, std::memory_order_release);
    }
    return reinterpret_cast<Fn>(p);
  }

 private:
  const char* symbol_;
  std::atomic<void*> real_{nullptr};
};

// The outermost runtime call in progress on this thread: its api names the first driver event of the same op.
class RuntimeLabel {
 public:
  RuntimeLabel(Api api, Op op) : self_(Self()) {
    active_ = self_.label == Api::kUnknown && self_.driver_depth == 0 && self_.in_recorder == 0 && Tracing();
    if (!active_) return;
    self_.label = api;
    self_.label_op = op;
    self_.label_used = false;
    self_.label_seq = op == Op::kFree ? TakeSequence() : 0;
  }
  ~RuntimeLabel() {
    if (!active_) return;
    self_.label = Api::kUnknown;
    // A free's number that no event used (a null free) must not hold back the low-water mark.
    if (self_.label_seq != 0) ReleaseSequence(self_.label_seq);
    self_.label_seq = 0;
  }
  RuntimeLabel(const RuntimeLabel&) = delete;
  RuntimeLabel& operator=(const RuntimeLabel&) = delete;

  // After the real call: if no driver event carried the label, records the call at the runtime level.
  void Finish(cudaError_t result, uint64_t address, uint64_t size, int32_t device, uint64_t stream = 0) {
    if (!active_ || self_.label_used) return;
    if (result == cudaSuccess && address == 0) return;  // nothing happened (size 0, null free)
    CallRecord r;
    r.api = self_.label;
    r.address = result == cudaSuccess ? address : 0;
    if (self_.label_op == Op::kFree) {
      if (result != cudaSuccess) r.address = address;
      r.seq = self_.label_seq;
    }
    r.size = size;
    r.stream = stream;
    r.device = device;
    r.device_known = device >= -1;
    r.result = static_cast<int32_t>(result);
    self_.label_used = true;
    Record(r);
  }

 private:
  ThreadState& self_;
  bool active_;
};

constexpr int32_t kAskDriver = -2;
constexpr int32_t kHost = format::kHostDevice;

uint64_t Ptr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

RuntimeFunction<cudaError_t (*)(void**, size_t)> g_malloc("cudaMalloc");
RuntimeFunction<cudaError_t (*)(void**, size_t*, size_t, size_t)> g_malloc_pitch("cudaMallocPitch");
RuntimeFunction<cudaError_t (*)(void**, size_t, unsigned int)> g_malloc_managed("cudaMallocManaged");
RuntimeFunction<cudaError_t (*)(void**, size_t)> g_malloc_host("cudaMallocHost");
RuntimeFunction<cudaError_t (*)(void**, size_t, unsigned int)> g_host_alloc("cudaHostAlloc");
RuntimeFunction<cudaError_t (*)(void*, size_t, unsigned int)> g_host_register("cudaHostRegister");
RuntimeFunction<cudaError_t (*)(void**, size_t, cudaStream_t)> g_malloc_async("cudaMallocAsync");
RuntimeFunction<cudaError_t (*)(void**, size_t, cudaStream_t)> g_malloc_async_ptsz("cudaMallocAsync_ptsz");
RuntimeFunction<cudaError_t (*)(void*)> g_free("cudaFree");
RuntimeFunction<cudaError_t (*)(void*)> g_free_host("cudaFreeHost");
RuntimeFunction<cudaError_t (*)(void*)> g_host_unregister("cudaHostUnregister");
RuntimeFunction<cudaError_t (*)(void*, cudaStream_t)> g_free_async("cudaFreeAsync");
RuntimeFunction<cudaError_t (*)(void*, cudaStream_t)> g_free_async_ptsz("cudaFreeAsync_ptsz");
using EntryPointFn = cudaError_t (*)(const char*, void**, unsigned long long, cudaDriverEntryPointQueryResult*);
using EntryPointByVersionFn = cudaError_t (*)(const char*, void**, unsigned int, unsigned long long,
                                              cudaDriverEntryPointQueryResult*);
RuntimeFunction<EntryPointFn> g_entry_point("cudaGetDriverEntryPoint");
RuntimeFunction<EntryPointFn> g_entry_point_ptsz("cudaGetDriverEntryPoint_ptsz");
RuntimeFunction<EntryPointByVersionFn> g_entry_point_by_version("cudaGetDriverEntryPointByVersion");
RuntimeFunction<EntryPointByVersionFn> g_entry_point_by_version_ptsz("cudaGetDriverEntryPointByVersion_ptsz");

template <typename Fn>
cudaError_t AllocWith(RuntimeFunction<Fn>& fn, Api api, void** ptr, size_t size, int32_t device, auto... rest) {
  Fn real = fn.get();
  if (real == nullptr) return cudaErrorInitializationError;
  RuntimeLabel label(api, Op::kAlloc);
  cudaError_t r = real(ptr, size, rest...);
  label.Finish(r, ptr != nullptr ? Ptr(*ptr) : 0, size, device);
  return r;
}

template <typename Fn>
cudaError_t FreeWith(RuntimeFunction<Fn>& fn, Api api, void* ptr, auto... rest) {
  Fn real = fn.get();
  if (real == nullptr) return cudaErrorInitializationError;
  // cudaFree(nullptr) is the usual way to create the context: nothing to label, and no sequence number to spend.
  if (ptr == nullptr) return real(ptr, rest...);
  RuntimeLabel label(api, Op::kFree);
  cudaError_t r = real(ptr, rest...);
  label.Finish(r, Ptr(ptr), 0, kAskDriver);
  return r;
}

// The ABI version of the pointers cudaGetDriverEntryPoint hands out: that of the runtime it came from.
int RuntimeVersionBeside(const void* runtime_function) {
  using VersionFn = cudaError_t (*)(int*);
  auto version_fn = reinterpret_cast<VersionFn>(ResolveBeside(runtime_function, "cudaRuntimeGetVersion"));
  int version = 0;
  if (version_fn == nullptr || version_fn(&version) != cudaSuccess) return 0;
  return version;
}

cudaError_t EntryPoint(EntryPointFn real, const char* symbol, void** fn, unsigned long long flags,
                       cudaDriverEntryPointQueryResult* status) {
  if (real == nullptr) return cudaErrorInitializationError;
  cudaError_t r = real(symbol, fn, flags, status);
  if (r == cudaSuccess && fn != nullptr && *fn != nullptr && !IsOwnFunction(*fn)) {
    int version = RuntimeVersionBeside(reinterpret_cast<void*>(real));
    // Unknown runtime version: leave the pointer alone rather than guess its ABI.
    if (version != 0) *fn = WrapDriverEntryPoint(symbol, version, *fn);
  }
  return r;
}

cudaError_t EntryPointByVersion(EntryPointByVersionFn real, const char* symbol, void** fn, unsigned int version,
                                unsigned long long flags, cudaDriverEntryPointQueryResult* status) {
  if (real == nullptr) return cudaErrorInitializationError;
  cudaError_t r = real(symbol, fn, version, flags, status);
  if (r == cudaSuccess && fn != nullptr && *fn != nullptr) *fn = WrapDriverEntryPoint(symbol, version, *fn);
  return r;
}

}  // namespace
}  // namespace cumemtrace::preload

using namespace cumemtrace::preload;  // NOLINT: the exported C functions below are thin forwarders

CUMEMTRACE_EXPORT cudaError_t cudaMalloc(void** ptr, size_t size) {
  return AllocWith(g_malloc, Api::kCudaMalloc, ptr, size, kAskDriver);
}
CUMEMTRACE_EXPORT cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int flags) {
  return AllocWith(g_malloc_managed, Api::kCudaMallocManaged, ptr, size, kAskDriver, flags);
}
CUMEMTRACE_EXPORT cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return AllocWith(g_malloc_host, Api::kCudaMallocHost, ptr, size, kHost);
}
CUMEMTRACE_EXPORT cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  return AllocWith(g_host_alloc, Api::kCudaHostAlloc, ptr, size, kHost, flags);
}
CUMEMTRACE_EXPORT cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t stream) {
  return AllocWith(g_malloc_async, Api::kCudaMallocAsync, ptr, size, kAskDriver, stream);
}
CUMEMTRACE_EXPORT cudaError_t cudaMallocAsync_ptsz(void** ptr, size_t size, cudaStream_t stream) {
  return AllocWith(g_malloc_async_ptsz, Api::kCudaMallocAsync, ptr, size, kAskDriver, stream);
}
CUMEMTRACE_EXPORT cudaError_t cudaMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height) {
  auto real = g_malloc_pitch.get();
  if (real == nullptr) return cudaErrorInitializationError;
  RuntimeLabel label(Api::kCudaMallocPitch, Op::kAlloc);
  cudaError_t r = real(ptr, pitch, width, height);
  uint64_t size = r == cudaSuccess && pitch != nullptr ? static_cast<uint64_t>(*pitch) * height : width * height;
  label.Finish(r, ptr != nullptr ? Ptr(*ptr) : 0, size, kAskDriver);
  return r;
}
CUMEMTRACE_EXPORT cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  auto real = g_host_register.get();
  if (real == nullptr) return cudaErrorInitializationError;
  RuntimeLabel label(Api::kCudaHostRegister, Op::kAlloc);
  cudaError_t r = real(ptr, size, flags);
  label.Finish(r, Ptr(ptr), size, kHost);
  return r;
}
CUMEMTRACE_EXPORT cudaError_t cudaFree(void* ptr) { return FreeWith(g_free, Api::kCudaFree, ptr); }
CUMEMTRACE_EXPORT cudaError_t cudaFreeHost(void* ptr) { return FreeWith(g_free_host, Api::kCudaFreeHost, ptr); }
CUMEMTRACE_EXPORT cudaError_t cudaHostUnregister(void* ptr) {
  return FreeWith(g_host_unregister, Api::kCudaHostUnregister, ptr);
}
CUMEMTRACE_EXPORT cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  return FreeWith(g_free_async, Api::kCudaFreeAsync, ptr, stream);
}
CUMEMTRACE_EXPORT cudaError_t cudaFreeAsync_ptsz(void* ptr, cudaStream_t stream) {
  return FreeWith(g_free_async_ptsz, Api::kCudaFreeAsync, ptr, stream);
}
CUMEMTRACE_EXPORT cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags,
                                                      cudaDriverEntryPointQueryResult* status) {
  return EntryPoint(g_entry_point.get(), symbol, fn, flags, status);
}
CUMEMTRACE_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** fn, unsigned long long flags,
                                                           cudaDriverEntryPointQueryResult* status) {
  return EntryPoint(g_entry_point_ptsz.get(), symbol, fn, flags, status);
}
CUMEMTRACE_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int version,
                                                               unsigned long long flags,
                                                               cudaDriverEntryPointQueryResult* status) {
  return EntryPointByVersion(g_entry_point_by_version.get(), symbol, fn, version, flags, status);
}
CUMEMTRACE_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** fn,
                                                                    unsigned int version, unsigned long long flags,
                                                                    cudaDriverEntryPointQueryResult* status) {
  return EntryPointByVersion(g_entry_point_by_version_ptsz.get(), symbol, fn, version, flags, status);
}
