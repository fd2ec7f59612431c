// Test double: a fake libcuda.so.1 (the CUDA driver) for cumemtrace's CPU tests; there is no GPU behind it.
//
// Why this exists: cumemtrace counts memory at the driver and must reach the driver every way programs do
// (exported symbols, dlopen + dlsym, cuGetProcAddress, cudart's entry points). The end-to-end tests run real
// programs against this library under the real preload, so every interposition path is exercised on a machine
// without a GPU. The library implements, with cuda.h's exact prototypes, the device queries the preload makes and
// every memory function it hooks, keeps a plausible allocator (device addresses from a reserved, never backed
// address range, freed addresses handed out again, a total that runs out, planted failures), and writes the
// ground-truth ledger (fake_ledger.h) that the tests compare the trace against.
//
// What it must never do: touch device addresses (nothing backs them), change errno, or return its functions
// through anything but their own definitions (-Bsymbolic: cuGetProcAddress hands out the driver's pointers even when
// a preload interposes the exported names, as the real driver does). Deviations from the real driver are kept to
// what the tests do not depend on: one address space for all devices, no legacy (pre-_v2) entry points, no
// context stack (a thread's current device is its last cuCtxSetCurrent, or FAKE_CUDA_DEVICE).

// The driver's own build defines this: cuda.h then also declares the legacy and the _ptsz prototypes, which are
// exactly the extra exported names a driver has (cuMemAllocAsync and cuMemAllocAsync_ptsz, cuGetProcAddress with 4
// arguments next to cuGetProcAddress_v2, ...).
#define __CUDA_API_VERSION_INTERNAL 1

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>

#pragma GCC visibility push(default)
#include <cuda.h>

#include "fake_cuda_control.h"
#pragma GCC visibility pop
// CUPTI's callback ids and parameter structs: what a CUPTI subscriber is handed (see fake_cuda_control.h).
#include <cupti_driver_cbid.h>
#include <generated_cuda_meta.h>

#include "fake_ledger.h"
#include "range_allocator.h"

// cuda.h only declares these handle types; the fake gives them a body.
struct CUctx_st {
  int device;
};
struct CUstream_st {
  int id;
};
struct CUmemPoolHandle_st {
  int device;
};

namespace cumemtrace::fakes {
namespace {

constexpr uint64_t kDefaultTotalBytes = 80ull << 30;
constexpr int kDefaultDeviceCount = 2;
constexpr uint64_t kArenaSize = 1ull << 40;        // address space only (PROT_NONE, MAP_NORESERVE)
constexpr uint64_t kMinArenaSize = 64ull << 30;
constexpr uint64_t kDeviceAlignment = 512;         // cudaMalloc guarantees at least 256
constexpr int kMaxStreams = 4096;

uint64_t AlignUp(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

uint64_t EnvBytes(const char* name, uint64_t fallback) {
  const char* text = getenv(name);
  if (text == nullptr || text[0] == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long value = strtoull(text, &end, 0);
  if (end == text || *end != '\0') {
    fprintf(stderr, "fake libcuda: %s=%s is not a number\n", name, text);
    abort();
  }
  return value;
}

// Restores errno on scope exit: the fake driver never changes what the program sees in errno.
class ErrnoKeeper {
 public:
  ErrnoKeeper() : saved_(errno) {}
  ~ErrnoKeeper() { errno = saved_; }
  ErrnoKeeper(const ErrnoKeeper&) = delete;
  ErrnoKeeper& operator=(const ErrnoKeeper&) = delete;

 private:
  int saved_;
};

enum class DeviceKind { kDevice, kManaged, kPool };

struct DeviceAllocation {
  uint64_t reserved;  // bytes taken from the address range and from the device's memory
  int device;
  DeviceKind kind;
};

struct PhysicalHandle {
  uint64_t size;
  int device;
};

struct Mapping {
  uint64_t size;
  uint64_t handle;
};

thread_local CUctx_st* current_context = nullptr;

std::atomic<FakeCudaApiCallback> api_callback{nullptr};
std::atomic<void*> api_callback_data{nullptr};

// Runs `body` (one memory function) between the enter and exit calls of the API callback, as the real driver
// calls a CUPTI subscriber. The callback runs outside the driver's lock.
#define FAKE_CUDA_API(name) CUPTI_DRIVER_TRACE_CBID_##name, #name
template <typename Params, typename Body>
CUresult WithApiCallbacks(unsigned int cbid, const char* name, const Params* params, Body body) {
  const FakeCudaApiCallback callback = api_callback.load();
  void* const data = api_callback_data.load();
  if (callback != nullptr) callback(data, 0, cbid, name, params, nullptr);
  const CUresult result = body();
  if (callback != nullptr) callback(data, 1, cbid, name, params, &result);
  return result;
}
thread_local const char* runtime_caller = nullptr;

// Which call is being served, for its ledger line.
struct Call {
  const char* api;
  bool has_stream = false;
  CUstream stream = nullptr;
};

class Driver {
 public:
  // Never destroyed: the preload may call in from its exit handlers after static destructors ran.
  static Driver& Get() {
    static Driver* driver = new Driver();
    return *driver;
  }

  std::mutex mu;
  std::atomic<bool> initialized{false};
  Ledger ledger;
  uint64_t total_bytes;
  uint64_t fail_above;
  int default_device;
  int device_count;
  RangeAllocator device_space{0, 0};
  RangeAllocator reserve_space{0, 0};
  uint64_t used[kFakeCudaMaxDevices] = {};
  std::map<uint64_t, DeviceAllocation> device_allocations;
  std::map<uint64_t, uint64_t> host_allocations;  // address -> mapped length
  std::map<uint64_t, uint64_t> registrations;     // start -> size
  std::map<uint64_t, PhysicalHandle> handles;
  uint64_t next_handle = 1;
  std::map<uint64_t, uint64_t> reservations;      // start -> size
  std::map<uint64_t, Mapping> mappings;           // start -> mapping
  CUctx_st contexts[kFakeCudaMaxDevices];
  CUmemPoolHandle_st pools[kFakeCudaMaxDevices];
  CUstream_st streams[kMaxStreams];
  std::atomic<int> next_stream{0};

  bool ValidDevice(int device) const { return device >= 0 && device < device_count; }

  int CurrentDevice() const { return current_context != nullptr ? current_context->device : default_device; }

  LedgerLine StartLine(const char* op, const Call& call, int device) const {
    LedgerLine line;
    line.op = op;
    line.api = call.api;
    line.device = device;
    line.has_stream = call.has_stream;
    line.stream = reinterpret_cast<uint64_t>(call.stream);
    line.via = runtime_caller;
    return line;
  }

  // Writes `line` with the result; a failed allocation also gets the device's free/total (what cuMemGetInfo says
  // right after it). Call with `mu` held.
  CUresult Finish(LedgerLine& line, CUresult result) {
    line.result = static_cast<int>(result);
    if (result != CUDA_SUCCESS && strcmp(line.op, "alloc") == 0 && initialized.load() && ValidDevice(line.device)) {
      line.has_mem_info = true;
      line.total_bytes = total_bytes;
      line.free_bytes = total_bytes - used[line.device];
    }
    ledger.Write(line);
    return result;
  }

  // Takes `size` bytes of device memory on `device` and an address for them. Call with `mu` held.
  CUresult TakeDeviceMemory(uint64_t size, int device, uint64_t* address, uint64_t* reserved) {
    if (size > fail_above) return CUDA_ERROR_OUT_OF_MEMORY;
    const uint64_t rounded = AlignUp(size, kDeviceAlignment);
    if (rounded < size || rounded > total_bytes - used[device]) return CUDA_ERROR_OUT_OF_MEMORY;
    const uint64_t got = device_space.Allocate(rounded, kDeviceAlignment);
    if (got == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    used[device] += rounded;
    *address = got;
    *reserved = rounded;
    return CUDA_SUCCESS;
  }

  CUresult Ready() const { return initialized.load() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

 private:
  Driver() {
    total_bytes = EnvBytes("FAKE_CUDA_TOTAL_BYTES", kDefaultTotalBytes);
    fail_above = EnvBytes("FAKE_CUDA_FAIL_ABOVE", std::numeric_limits<uint64_t>::max());
    device_count = static_cast<int>(EnvBytes("FAKE_CUDA_DEVICE_COUNT", kDefaultDeviceCount));
    if (device_count < 1 || device_count > kFakeCudaMaxDevices) device_count = kDefaultDeviceCount;
    default_device = static_cast<int>(EnvBytes("FAKE_CUDA_DEVICE", 0));
    if (!ValidDevice(default_device)) default_device = 0;
    for (int i = 0; i < kFakeCudaMaxDevices; ++i) {
      contexts[i].device = i;
      pools[i].device = i;
    }
    for (int i = 0; i < kMaxStreams; ++i) streams[i].id = i + 1;
    ReserveArena();
    pthread_atfork([] { Get().mu.lock(); }, [] { Get().mu.unlock(); }, [] { Get().mu.unlock(); });
  }

  // Reserves the fake device address range: address space that nothing else in the process can get, never backed.
  void ReserveArena() {
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    void* base = mmap(reinterpret_cast<void*>(kFakeCudaArenaHint), kArenaSize, PROT_NONE,
                      flags | MAP_FIXED_NOREPLACE, -1, 0);
    uint64_t size = kArenaSize;
    while (base == MAP_FAILED && size >= kMinArenaSize) {
      base = mmap(nullptr, size, PROT_NONE, flags, -1, 0);
      if (base == MAP_FAILED) size /= 2;
    }
    if (base == MAP_FAILED) {
      fprintf(stderr, "fake libcuda: cannot reserve a device address range\n");
      abort();
    }
    const uint64_t start = reinterpret_cast<uint64_t>(base);
    device_space = RangeAllocator(start, size / 2);
    reserve_space = RangeAllocator(start + size / 2, size / 2);
  }
};

Driver& D() { return Driver::Get(); }

CUresult AllocateDevice(const Call& call, DeviceKind kind, CUdeviceptr* dptr, uint64_t size, int device) {
  Driver& d = D();
  std::lock_guard lock(d.mu);
  LedgerLine line = d.StartLine("alloc", call, device);
  line.size = size;
  CUresult result = d.Ready();
  if (result == CUDA_SUCCESS && (dptr == nullptr || size == 0)) result = CUDA_ERROR_INVALID_VALUE;
  if (result == CUDA_SUCCESS && !d.ValidDevice(device)) result = CUDA_ERROR_INVALID_DEVICE;
  uint64_t address = 0;
  uint64_t reserved = 0;
  if (result == CUDA_SUCCESS) result = d.TakeDeviceMemory(size, device, &address, &reserved);
  if (result == CUDA_SUCCESS) {
    d.device_allocations[address] = {reserved, device, kind};
    *dptr = address;
    line.address = address;
  }
  return d.Finish(line, result);
}

CUresult FreeDevice(const Call& call, CUdeviceptr dptr) {
  Driver& d = D();
  std::lock_guard lock(d.mu);
  LedgerLine line = d.StartLine("free", call, d.CurrentDevice());
  line.address = dptr;
  CUresult result = d.Ready();
  if (result == CUDA_SUCCESS) {
    auto it = d.device_allocations.find(dptr);
    if (it == d.device_allocations.end()) {
      result = CUDA_ERROR_INVALID_VALUE;
    } else {
      line.device = it->second.device;
      d.device_space.Free(it->first, it->second.reserved);
      d.used[it->second.device] -= it->second.reserved;
      d.device_allocations.erase(it);
    }
  }
  return d.Finish(line, result);
}

// Pinned host memory is real memory: the program may write to it.
CUresult AllocateHost(const Call& call, void** pp, uint64_t size) {
  Driver& d = D();
  std::lock_guard lock(d.mu);
  LedgerLine line = d.StartLine("alloc", call, d.CurrentDevice());
  line.size = size;
  CUresult result = d.Ready();
  if (result == CUDA_SUCCESS && (pp == nullptr || size == 0)) result = CUDA_ERROR_INVALID_VALUE;
  if (result == CUDA_SUCCESS && size > d.fail_above) result = CUDA_ERROR_OUT_OF_MEMORY;
  if (result == CUDA_SUCCESS) {
    const uint64_t length = AlignUp(size, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
    void* p = length < size ? MAP_FAILED
                            : mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      result = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      d.host_allocations[reinterpret_cast<uint64_t>(p)] = length;
      *pp = p;
      line.address = reinterpret_cast<uint64_t>(p);
    }
  }
  return d.Finish(line, result);
}

CUresult GetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* status);

// FakeCudaCloseFreeGate (fake_cuda_control.h).
std::atomic<bool> free_gate_closed{false};
std::atomic<int> free_gate_waiters{0};

void WaitAtFreeGate() {
  if (!free_gate_closed.load()) return;
  free_gate_waiters.fetch_add(1);
  while (free_gate_closed.load()) sched_yield();
  free_gate_waiters.fetch_sub(1);
}

}  // namespace
}  // namespace cumemtrace::fakes

using cumemtrace::fakes::AllocateDevice;
using cumemtrace::fakes::AllocateHost;
using cumemtrace::fakes::AlignUp;
using cumemtrace::fakes::Call;
using cumemtrace::fakes::D;
using cumemtrace::fakes::DeviceKind;
using cumemtrace::fakes::Driver;
using cumemtrace::fakes::ErrnoKeeper;
using cumemtrace::fakes::FreeDevice;
using cumemtrace::fakes::LedgerLine;
using cumemtrace::fakes::WithApiCallbacks;

extern "C" {

void FakeCudaSetRuntimeCaller(const char* runtime_api) {
  cumemtrace::fakes::runtime_caller = runtime_api;
}

void FakeCudaCloseFreeGate(int closed) { cumemtrace::fakes::free_gate_closed.store(closed != 0); }

int FakeCudaFreeGateWaiters() { return cumemtrace::fakes::free_gate_waiters.load(); }

void FakeCudaSetApiCallback(FakeCudaApiCallback callback, void* userdata) {
  cumemtrace::fakes::api_callback_data.store(userdata);
  cumemtrace::fakes::api_callback.store(callback);
}

// -Bsymbolic binds these calls to the library's own functions: an interposer of the exported names never sees them.
CUresult FakeCudaInternalAlloc(CUdeviceptr* dptr, size_t bytesize) { return cuMemAlloc_v2(dptr, bytesize); }
CUresult FakeCudaInternalFree(CUdeviceptr dptr) { return cuMemFree_v2(dptr); }

// ---- Initialization and device queries ----

CUresult cuInit(unsigned int Flags) {
  ErrnoKeeper keep;
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  D().initialized.store(true);
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = kFakeCudaDriverVersion;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  ErrnoKeeper keep;
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = d.device_count;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  ErrnoKeeper keep;
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!d.ValidDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  ErrnoKeeper keep;
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!d.ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, static_cast<size_t>(len), "Fake CUDA Device %d", dev);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  ErrnoKeeper keep;
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!d.ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = d.total_bytes;
  return CUDA_SUCCESS;
}

// UUID of device n: "FAKECUDA" followed by seven zero bytes and n.
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  ErrnoKeeper keep;
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!d.ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  memset(uuid->bytes, 0, sizeof(uuid->bytes));
  memcpy(uuid->bytes, "FAKECUDA", 8);
  uuid->bytes[15] = static_cast<char>(dev);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  ErrnoKeeper keep;
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!d.ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = &d.contexts[dev];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  return d.ValidDevice(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (ctx != nullptr && (ctx < &d.contexts[0] || ctx >= &d.contexts[d.device_count])) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  cumemtrace::fakes::current_context = ctx;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = cumemtrace::fakes::current_context;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = d.CurrentDevice();
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize() { return D().Ready(); }

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  ErrnoKeeper keep;
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(d.mu);
  const int device = d.CurrentDevice();
  *total = d.total_bytes;
  *free = d.total_bytes - d.used[device];
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (phStream == nullptr || Flags > CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  const int index = d.next_stream.fetch_add(1);
  if (index >= cumemtrace::fakes::kMaxStreams) return CUDA_ERROR_OUT_OF_MEMORY;
  *phStream = &d.streams[index];
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream hStream) {
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  return hStream == nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream) { return D().Ready(); }

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!d.ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pool_out = &d.pools[dev];
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *pStr = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *pStr = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *pStr = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *pStr = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_INVALID_DEVICE: *pStr = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *pStr = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_HANDLE: *pStr = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_FOUND: *pStr = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: *pStr = "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"; break;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: *pStr = "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"; break;
    default: *pStr = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** pStr) { return cuGetErrorName(error, pStr); }

// ---- Device, managed and stream-ordered memory ----

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  ErrnoKeeper keep;
  cuMemAlloc_v2_params params{dptr, bytesize};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemAlloc_v2), &params, [&]() -> CUresult {
    return AllocateDevice({"cuMemAlloc_v2"}, DeviceKind::kDevice, dptr, bytesize, D().CurrentDevice());
  });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  ErrnoKeeper keep;
  cuMemAllocPitch_v2_params params{dptr, pPitch, WidthInBytes, Height, ElementSizeBytes};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemAllocPitch_v2), &params, [&]() -> CUresult {
    const bool valid = dptr != nullptr && pPitch != nullptr && WidthInBytes > 0 && Height > 0 &&
                       (ElementSizeBytes == 4 || ElementSizeBytes == 8 || ElementSizeBytes == 16);
    const uint64_t pitch = AlignUp(WidthInBytes, kFakeCudaPitchAlignment);
    CUdeviceptr got = 0;
    const CUresult result = AllocateDevice({"cuMemAllocPitch_v2"}, DeviceKind::kDevice, valid ? &got : nullptr,
                                           pitch * Height, D().CurrentDevice());
    if (result == CUDA_SUCCESS) {
      *dptr = got;
      *pPitch = pitch;
    }
    return result;
  });
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  ErrnoKeeper keep;
  cuMemAllocManaged_params params{dptr, bytesize, flags};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemAllocManaged), &params, [&]() -> CUresult {
    const bool valid = flags == CU_MEM_ATTACH_GLOBAL || flags == CU_MEM_ATTACH_HOST;
    return AllocateDevice({"cuMemAllocManaged"}, DeviceKind::kManaged, valid ? dptr : nullptr, bytesize,
                          D().CurrentDevice());
  });
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  ErrnoKeeper keep;
  cuMemAllocAsync_params params{dptr, bytesize, hStream};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemAllocAsync), &params, [&]() -> CUresult {
    return AllocateDevice({"cuMemAllocAsync", true, hStream}, DeviceKind::kPool, dptr, bytesize,
                          D().CurrentDevice());
  });
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  ErrnoKeeper keep;
  cuMemAllocAsync_ptsz_params params{dptr, bytesize, hStream};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemAllocAsync_ptsz), &params, [&]() -> CUresult {
    return AllocateDevice({"cuMemAllocAsync_ptsz", true, hStream}, DeviceKind::kPool, dptr, bytesize,
                          D().CurrentDevice());
  });
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  ErrnoKeeper keep;
  cuMemAllocFromPoolAsync_params params{dptr, bytesize, pool, hStream};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemAllocFromPoolAsync), &params, [&]() -> CUresult {
    return AllocateDevice({"cuMemAllocFromPoolAsync", true, hStream}, DeviceKind::kPool,
                          pool != nullptr ? dptr : nullptr, bytesize, pool != nullptr ? pool->device : 0);
  });
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  ErrnoKeeper keep;
  cuMemAllocFromPoolAsync_ptsz_params params{dptr, bytesize, pool, hStream};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemAllocFromPoolAsync_ptsz), &params, [&]() -> CUresult {
    return AllocateDevice({"cuMemAllocFromPoolAsync_ptsz", true, hStream}, DeviceKind::kPool,
                          pool != nullptr ? dptr : nullptr, bytesize, pool != nullptr ? pool->device : 0);
  });
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  ErrnoKeeper keep;
  cumemtrace::fakes::WaitAtFreeGate();
  cuMemFree_v2_params params{dptr};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemFree_v2), &params, [&]() -> CUresult {
    return FreeDevice({"cuMemFree_v2"}, dptr);
  });
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  ErrnoKeeper keep;
  cuMemFreeAsync_params params{dptr, hStream};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemFreeAsync), &params, [&]() -> CUresult {
    return FreeDevice({"cuMemFreeAsync", true, hStream}, dptr);
  });
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  ErrnoKeeper keep;
  cuMemFreeAsync_ptsz_params params{dptr, hStream};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemFreeAsync_ptsz), &params, [&]() -> CUresult {
    return FreeDevice({"cuMemFreeAsync_ptsz", true, hStream}, dptr);
  });
}

// ---- Pinned and registered host memory ----

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  ErrnoKeeper keep;
  cuMemAllocHost_v2_params params{pp, bytesize};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemAllocHost_v2), &params, [&]() -> CUresult {
    return AllocateHost({"cuMemAllocHost_v2"}, pp, bytesize);
  });
}

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  ErrnoKeeper keep;
  cuMemHostAlloc_params params{pp, bytesize, Flags};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemHostAlloc), &params, [&]() -> CUresult {
    constexpr unsigned int kKnownFlags = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                         CU_MEMHOSTALLOC_WRITECOMBINED;
    return AllocateHost({"cuMemHostAlloc"}, (Flags & ~kKnownFlags) == 0 ? pp : nullptr, bytesize);
  });
}

CUresult cuMemFreeHost(void* p) {
  ErrnoKeeper keep;
  cuMemFreeHost_params params{p};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemFreeHost), &params, [&]() -> CUresult {
    Driver& d = D();
    std::lock_guard lock(d.mu);
    LedgerLine line = d.StartLine("free", {"cuMemFreeHost"}, d.CurrentDevice());
    line.address = reinterpret_cast<uint64_t>(p);
    CUresult result = d.Ready();
    if (result == CUDA_SUCCESS) {
      auto it = d.host_allocations.find(line.address);
      if (it == d.host_allocations.end()) {
        result = CUDA_ERROR_INVALID_VALUE;
      } else {
        munmap(p, it->second);
        d.host_allocations.erase(it);
      }
    }
    return d.Finish(line, result);
  });
}

CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
  ErrnoKeeper keep;
  cuMemHostRegister_v2_params params{p, bytesize, Flags};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemHostRegister_v2), &params, [&]() -> CUresult {
    Driver& d = D();
    std::lock_guard lock(d.mu);
    LedgerLine line = d.StartLine("alloc", {"cuMemHostRegister_v2"}, d.CurrentDevice());
    const uint64_t start = reinterpret_cast<uint64_t>(p);
    line.address = start;
    line.size = bytesize;
    CUresult result = d.Ready();
    constexpr unsigned int kKnownFlags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                         CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    if (result == CUDA_SUCCESS && (p == nullptr || bytesize == 0 || (Flags & ~kKnownFlags) != 0)) {
      result = CUDA_ERROR_INVALID_VALUE;
    }
    if (result == CUDA_SUCCESS) {
      auto next = d.registrations.lower_bound(start);
      const bool overlaps_next = next != d.registrations.end() && next->first < start + bytesize;
      const bool overlaps_prev = next != d.registrations.begin() && std::prev(next)->first +
                                                                            std::prev(next)->second > start;
      if (overlaps_next || overlaps_prev) {
        result = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
      } else {
        d.registrations[start] = bytesize;
      }
    }
    return d.Finish(line, result);
  });
}

CUresult cuMemHostUnregister(void* p) {
  ErrnoKeeper keep;
  cuMemHostUnregister_params params{p};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemHostUnregister), &params, [&]() -> CUresult {
    Driver& d = D();
    std::lock_guard lock(d.mu);
    LedgerLine line = d.StartLine("free", {"cuMemHostUnregister"}, d.CurrentDevice());
    line.address = reinterpret_cast<uint64_t>(p);
    CUresult result = d.Ready();
    if (result == CUDA_SUCCESS && d.registrations.erase(line.address) == 0) {
      result = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    return d.Finish(line, result);
  });
}

// ---- Virtual memory management ----

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags) {
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kFakeCudaGranularity;
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  ErrnoKeeper keep;
  cuMemCreate_params params{handle, size, prop, flags};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemCreate), &params, [&]() -> CUresult {
    Driver& d = D();
    std::lock_guard lock(d.mu);
    const int device = prop != nullptr && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
    LedgerLine line = d.StartLine("alloc", {"cuMemCreate"}, device);
    line.size = size;
    CUresult result = d.Ready();
    if (result == CUDA_SUCCESS &&
        (handle == nullptr || prop == nullptr || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || flags != 0 ||
         size == 0 || size % kFakeCudaGranularity != 0)) {
      result = CUDA_ERROR_INVALID_VALUE;
    }
    if (result == CUDA_SUCCESS && !d.ValidDevice(device)) result = CUDA_ERROR_INVALID_DEVICE;
    if (result == CUDA_SUCCESS && (size > d.fail_above || size > d.total_bytes - d.used[device])) {
      result = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (result == CUDA_SUCCESS) {
      const uint64_t h = d.next_handle++;
      d.handles[h] = {size, device};
      d.used[device] += size;
      *handle = h;
      line.address = h;
    }
    return d.Finish(line, result);
  });
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  ErrnoKeeper keep;
  cuMemRelease_params params{handle};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemRelease), &params, [&]() -> CUresult {
    Driver& d = D();
    std::lock_guard lock(d.mu);
    LedgerLine line = d.StartLine("free", {"cuMemRelease"}, d.CurrentDevice());
    line.address = handle;
    CUresult result = d.Ready();
    if (result == CUDA_SUCCESS) {
      auto it = d.handles.find(handle);
      if (it == d.handles.end()) {
        result = CUDA_ERROR_INVALID_VALUE;
      } else {
        line.device = it->second.device;
        d.used[it->second.device] -= it->second.size;
        d.handles.erase(it);
      }
    }
    return d.Finish(line, result);
  });
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  ErrnoKeeper keep;
  cuMemAddressReserve_params params{ptr, size, alignment, addr, flags};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemAddressReserve), &params, [&]() -> CUresult {
    Driver& d = D();
    std::lock_guard lock(d.mu);
    LedgerLine line = d.StartLine("alloc", {"cuMemAddressReserve"}, d.CurrentDevice());
    line.size = size;
    CUresult result = d.Ready();
    if (alignment == 0) alignment = kFakeCudaGranularity;
    if (result == CUDA_SUCCESS && (ptr == nullptr || size == 0 || size % kFakeCudaGranularity != 0 || flags != 0 ||
                                   (alignment & (alignment - 1)) != 0 || alignment % kFakeCudaGranularity != 0)) {
      result = CUDA_ERROR_INVALID_VALUE;
    }
    if (result == CUDA_SUCCESS) {
      const uint64_t got = d.reserve_space.Allocate(size, alignment);
      if (got == 0) {
        result = CUDA_ERROR_OUT_OF_MEMORY;
      } else {
        d.reservations[got] = size;
        *ptr = got;
        line.address = got;
      }
    }
    return d.Finish(line, result);
  });
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  ErrnoKeeper keep;
  cuMemAddressFree_params params{ptr, size};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemAddressFree), &params, [&]() -> CUresult {
    Driver& d = D();
    std::lock_guard lock(d.mu);
    LedgerLine line = d.StartLine("free", {"cuMemAddressFree"}, d.CurrentDevice());
    line.address = ptr;
    CUresult result = d.Ready();
    if (result == CUDA_SUCCESS) {
      auto it = d.reservations.find(ptr);
      if (it == d.reservations.end() || it->second != size) {
        result = CUDA_ERROR_INVALID_VALUE;
      } else {
        d.reserve_space.Free(ptr, size);
        d.reservations.erase(it);
      }
    }
    return d.Finish(line, result);
  });
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  ErrnoKeeper keep;
  cuMemMap_params params{ptr, size, offset, handle, flags};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemMap), &params, [&]() -> CUresult {
    Driver& d = D();
    std::lock_guard lock(d.mu);
    LedgerLine line = d.StartLine("alloc", {"cuMemMap"}, d.CurrentDevice());
    line.address = ptr;
    line.size = size;
    line.has_aux = true;
    line.aux = handle;
    CUresult result = d.Ready();
    auto h = d.handles.find(handle);
    if (h != d.handles.end()) line.device = h->second.device;
    auto reservation = d.reservations.upper_bound(ptr);
    const bool in_reservation = reservation != d.reservations.begin() &&
                                std::prev(reservation)->first + std::prev(reservation)->second >= ptr + size;
    auto next = d.mappings.lower_bound(ptr);
    const bool overlaps = (next != d.mappings.end() && next->first < ptr + size) ||
                          (next != d.mappings.begin() && std::prev(next)->first + std::prev(next)->second.size > ptr);
    if (result == CUDA_SUCCESS &&
        (flags != 0 || size == 0 || size % kFakeCudaGranularity != 0 || h == d.handles.end() || !in_reservation ||
         overlaps || offset + size > h->second.size)) {
      result = CUDA_ERROR_INVALID_VALUE;
    }
    if (result == CUDA_SUCCESS) d.mappings[ptr] = {size, handle};
    return d.Finish(line, result);
  });
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  ErrnoKeeper keep;
  cuMemUnmap_params params{ptr, size};
  return WithApiCallbacks(FAKE_CUDA_API(cuMemUnmap), &params, [&]() -> CUresult {
    Driver& d = D();
    std::lock_guard lock(d.mu);
    LedgerLine line = d.StartLine("free", {"cuMemUnmap"}, d.CurrentDevice());
    line.address = ptr;
    CUresult result = d.Ready();
    if (result == CUDA_SUCCESS) {
      auto it = d.mappings.find(ptr);
      if (it == d.mappings.end() || it->second.size != size) {
        result = CUDA_ERROR_INVALID_VALUE;
      } else {
        auto h = d.handles.find(it->second.handle);
        if (h != d.handles.end()) line.device = h->second.device;
        d.mappings.erase(it);
      }
    }
    return d.Finish(line, result);
  });
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  Driver& d = D();
  if (d.Ready() != CUDA_SUCCESS) return d.Ready();
  std::lock_guard lock(d.mu);
  // [ptr, ptr + size) must be covered by mappings without gaps (it may span several).
  auto it = d.mappings.upper_bound(ptr);
  bool mapped = it != d.mappings.begin();
  if (mapped) {
    --it;
    uint64_t covered = it->first + it->second.size;
    mapped = covered > ptr;
    for (++it; mapped && covered < ptr + size; ++it) {
      mapped = it != d.mappings.end() && it->first == covered;
      if (mapped) covered += it->second.size;
    }
  }
  return desc != nullptr && count > 0 && size > 0 && mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- Entry points ----

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
  ErrnoKeeper keep;
  return cumemtrace::fakes::GetProcAddress(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  ErrnoKeeper keep;
  return cumemtrace::fakes::GetProcAddress(symbol, pfn, cudaVersion, flags, nullptr);
}

}  // extern "C"

namespace cumemtrace::fakes {
namespace {

// One versioned implementation of a driver function: what cuGetProcAddress returns for `name` when the caller's
// CUDA version is at least `since` (the newest such row wins), and the per-thread-default-stream variant if any.
struct ProcRow {
  const char* name;
  int since;
  void* function;
  void* ptsz = nullptr;
};

template <typename F>
void* Fn(F* function) {
  return reinterpret_cast<void*>(function);
}

const ProcRow kProcTable[] = {
    {"cuInit", 2000, Fn(&cuInit)},
    {"cuDriverGetVersion", 2020, Fn(&cuDriverGetVersion)},
    {"cuDeviceGet", 2000, Fn(&cuDeviceGet)},
    {"cuDeviceGetCount", 2000, Fn(&cuDeviceGetCount)},
    {"cuDeviceGetName", 2000, Fn(&cuDeviceGetName)},
    {"cuDeviceTotalMem", 3020, Fn(&cuDeviceTotalMem_v2)},
    {"cuDeviceGetUuid", 9020, Fn(&cuDeviceGetUuid)},
    {"cuDeviceGetUuid", 11040, Fn(&cuDeviceGetUuid_v2)},
    {"cuDevicePrimaryCtxRetain", 7000, Fn(&cuDevicePrimaryCtxRetain)},
    {"cuDevicePrimaryCtxRelease", 11000, Fn(&cuDevicePrimaryCtxRelease_v2)},
    {"cuCtxSetCurrent", 4000, Fn(&cuCtxSetCurrent)},
    {"cuCtxGetCurrent", 4000, Fn(&cuCtxGetCurrent)},
    {"cuCtxGetDevice", 2000, Fn(&cuCtxGetDevice)},
    {"cuCtxSynchronize", 2000, Fn(&cuCtxSynchronize)},
    {"cuMemGetInfo", 3020, Fn(&cuMemGetInfo_v2)},
    {"cuStreamCreate", 2000, Fn(&cuStreamCreate)},
    {"cuStreamDestroy", 4000, Fn(&cuStreamDestroy_v2)},
    {"cuStreamSynchronize", 2000, Fn(&cuStreamSynchronize)},
    {"cuDeviceGetDefaultMemPool", 11020, Fn(&cuDeviceGetDefaultMemPool)},
    {"cuGetErrorName", 6000, Fn(&cuGetErrorName)},
    {"cuGetErrorString", 6000, Fn(&cuGetErrorString)},
    {"cuMemAlloc", 3020, Fn(&cuMemAlloc_v2)},
    {"cuMemAllocPitch", 3020, Fn(&cuMemAllocPitch_v2)},
    {"cuMemAllocManaged", 6000, Fn(&cuMemAllocManaged)},
    {"cuMemAllocHost", 3020, Fn(&cuMemAllocHost_v2)},
    {"cuMemHostAlloc", 2020, Fn(&cuMemHostAlloc)},
    {"cuMemHostRegister", 6050, Fn(&cuMemHostRegister_v2)},
    {"cuMemAllocAsync", 11020, Fn(&cuMemAllocAsync), Fn(&cuMemAllocAsync_ptsz)},
    {"cuMemAllocFromPoolAsync", 11020, Fn(&cuMemAllocFromPoolAsync), Fn(&cuMemAllocFromPoolAsync_ptsz)},
    {"cuMemFree", 3020, Fn(&cuMemFree_v2)},
    {"cuMemFreeHost", 2000, Fn(&cuMemFreeHost)},
    {"cuMemHostUnregister", 4000, Fn(&cuMemHostUnregister)},
    {"cuMemFreeAsync", 11020, Fn(&cuMemFreeAsync), Fn(&cuMemFreeAsync_ptsz)},
    {"cuMemGetAllocationGranularity", 10020, Fn(&cuMemGetAllocationGranularity)},
    {"cuMemCreate", 10020, Fn(&cuMemCreate)},
    {"cuMemRelease", 10020, Fn(&cuMemRelease)},
    {"cuMemAddressReserve", 10020, Fn(&cuMemAddressReserve)},
    {"cuMemAddressFree", 10020, Fn(&cuMemAddressFree)},
    {"cuMemMap", 10020, Fn(&cuMemMap)},
    {"cuMemUnmap", 10020, Fn(&cuMemUnmap)},
    {"cuMemSetAccess", 10020, Fn(&cuMemSetAccess)},
    {"cuGetProcAddress", 11030, Fn(&cuGetProcAddress)},
    {"cuGetProcAddress", 12000, Fn(&cuGetProcAddress_v2)},
};

CUresult GetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* status) {
  constexpr cuuint64_t kKnownFlags = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if (symbol == nullptr || pfn == nullptr || (flags & ~kKnownFlags) != 0) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const ProcRow* best = nullptr;
  bool known = false;
  for (const ProcRow& row : kProcTable) {
    if (strcmp(row.name, symbol) != 0) continue;
    known = true;
    if (row.since <= cuda_version && (best == nullptr || row.since > best->since)) best = &row;
  }
  if (best == nullptr) {
    if (status != nullptr) {
      *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    return CUDA_ERROR_NOT_FOUND;
  }
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  *pfn = per_thread && best->ptsz != nullptr ? best->ptsz : best->function;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace cumemtrace::fakes
