// Test double: a fake libcudart.so.13 (the shared CUDA runtime) for cumemtrace's CPU tests; no GPU behind it.
//
// Why this exists: PyTorch and most CUDA programs allocate through the shared runtime, and cumemtrace must label
// such a call with its runtime API while counting it at the driver underneath (docs/design.md). For that test to
// mean something, this fake reaches the driver exactly the way the real libcudart.so.13 does: dlopen("libcuda.so.1",
// RTLD_NOW | RTLD_LOCAL) on first use, dlsym("cuGetProcAddress_v2") on that handle, and every other driver function
// through cuGetProcAddress_v2 with its base name, the runtime's version and CU_GET_PROC_ADDRESS_DEFAULT. It never
// links libcuda, never calls an exported cu* symbol directly, and makes exactly one driver memory call per runtime
// memory call (none for cudaMalloc(0) or cudaFree(nullptr), as the real runtime).
//
// Test-only addition: around each driver memory call it labels the fake driver's ledger with the runtime call's
// name (FakeCudaSetRuntimeCaller, found with dlsym on the same handle), so the tests know which label to expect.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>

#pragma GCC visibility push(default)
#include <cuda.h>
#include <cuda_runtime_api.h>
#pragma GCC visibility pop

#include "fake_cuda_control.h"

namespace {

// The driver functions this runtime uses: member, base name asked of cuGetProcAddress, prototype in cuda.h.
#define FAKE_CUDART_DRIVER_FUNCTIONS(X)                                      \
  X(init, "cuInit", cuInit)                                                  \
  X(driver_get_version, "cuDriverGetVersion", cuDriverGetVersion)            \
  X(device_get, "cuDeviceGet", cuDeviceGet)                                  \
  X(device_get_count, "cuDeviceGetCount", cuDeviceGetCount)                  \
  X(primary_ctx_retain, "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain) \
  X(ctx_set_current, "cuCtxSetCurrent", cuCtxSetCurrent)                     \
  X(ctx_get_device, "cuCtxGetDevice", cuCtxGetDevice)                        \
  X(stream_create, "cuStreamCreate", cuStreamCreate)                         \
  X(stream_destroy, "cuStreamDestroy", cuStreamDestroy_v2)                   \
  X(mem_alloc, "cuMemAlloc", cuMemAlloc_v2)                                  \
  X(mem_alloc_pitch, "cuMemAllocPitch", cuMemAllocPitch_v2)                  \
  X(mem_alloc_managed, "cuMemAllocManaged", cuMemAllocManaged)               \
  X(mem_alloc_host, "cuMemAllocHost", cuMemAllocHost_v2)                     \
  X(mem_host_alloc, "cuMemHostAlloc", cuMemHostAlloc)                        \
  X(mem_host_register, "cuMemHostRegister", cuMemHostRegister_v2)            \
  X(mem_alloc_async, "cuMemAllocAsync", cuMemAllocAsync)                     \
  X(mem_free, "cuMemFree", cuMemFree_v2)                                     \
  X(mem_free_host, "cuMemFreeHost", cuMemFreeHost)                           \
  X(mem_host_unregister, "cuMemHostUnregister", cuMemHostUnregister)         \
  X(mem_free_async, "cuMemFreeAsync", cuMemFreeAsync)

struct DriverApi {
#define FAKE_CUDART_MEMBER(member, name, prototype) decltype(&prototype) member = nullptr;
  FAKE_CUDART_DRIVER_FUNCTIONS(FAKE_CUDART_MEMBER)
#undef FAKE_CUDART_MEMBER
  decltype(&cuGetProcAddress_v2) get_proc_address = nullptr;
  void (*set_caller)(const char*) = nullptr;
  cudaError_t status = cudaSuccess;  // not cudaSuccess: the driver cannot be used, every call returns this
};

cudaError_t ToCudaError(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return cudaErrorHostMemoryAlreadyRegistered;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return cudaErrorHostMemoryNotRegistered;
    case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
    default: return cudaErrorUnknown;
  }
}

DriverApi LoadDriver() {
  DriverApi api;
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    api.status = cudaErrorInsufficientDriver;
    return api;
  }
  api.get_proc_address = reinterpret_cast<decltype(api.get_proc_address)>(dlsym(handle, "cuGetProcAddress_v2"));
  api.set_caller = reinterpret_cast<decltype(api.set_caller)>(dlsym(handle, kFakeCudaSetRuntimeCallerSymbol));
  if (api.get_proc_address == nullptr) {
    api.status = cudaErrorInsufficientDriver;
    return api;
  }
#define FAKE_CUDART_RESOLVE(member, name, prototype)                                                       \
  {                                                                                                        \
    void* function = nullptr;                                                                              \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                           \
    if (api.get_proc_address(name, &function, CUDART_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found) !=     \
            CUDA_SUCCESS ||                                                                                \
        found != CU_GET_PROC_ADDRESS_SUCCESS || function == nullptr) {                                     \
      api.status = cudaErrorInsufficientDriver;                                                            \
    }                                                                                                      \
    api.member = reinterpret_cast<decltype(api.member)>(function);                                         \
  }
  FAKE_CUDART_DRIVER_FUNCTIONS(FAKE_CUDART_RESOLVE)
#undef FAKE_CUDART_RESOLVE
  if (api.status == cudaSuccess) api.status = ToCudaError(api.init(0));
  return api;
}

// Loaded on the first runtime call, from whichever thread makes it, as the real runtime does.
const DriverApi& Driver() {
  static const DriverApi api = LoadDriver();
  return api;
}

// Labels the fake driver's ledger lines written during one runtime call.
class RuntimeCall {
 public:
  RuntimeCall(const DriverApi& driver, const char* runtime_api) : driver_(driver) {
    if (driver_.set_caller != nullptr) driver_.set_caller(runtime_api);
  }
  ~RuntimeCall() {
    if (driver_.set_caller != nullptr) driver_.set_caller(nullptr);
  }
  RuntimeCall(const RuntimeCall&) = delete;
  RuntimeCall& operator=(const RuntimeCall&) = delete;

 private:
  const DriverApi& driver_;
};

// Runs `call(driver)` (which returns a CUresult) labelled `runtime_api`, after the runtime's initialization.
template <typename F>
cudaError_t DriverCall(const char* runtime_api, F call) {
  const DriverApi& driver = Driver();
  if (driver.status != cudaSuccess) return driver.status;
  RuntimeCall label(driver, runtime_api);
  return ToCudaError(call(driver));
}

cudaError_t EntryPoint(const char* symbol, void** funcPtr, unsigned int cudaVersion, unsigned long long flags,
                       cudaDriverEntryPointQueryResult* driverStatus) {
  const DriverApi& driver = Driver();
  if (driver.status != cudaSuccess) return driver.status;
  if (symbol == nullptr || funcPtr == nullptr || cudaVersion > static_cast<unsigned int>(kFakeCudaDriverVersion)) {
    return cudaErrorInvalidValue;
  }
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult result =
      driver.get_proc_address(symbol, funcPtr, static_cast<int>(cudaVersion), flags, &found);
  if (result != CUDA_SUCCESS && result != CUDA_ERROR_NOT_FOUND) return ToCudaError(result);
  if (result != CUDA_SUCCESS) *funcPtr = nullptr;
  if (driverStatus != nullptr) {
    switch (found) {
      case CU_GET_PROC_ADDRESS_SUCCESS: *driverStatus = cudaDriverEntryPointSuccess; break;
      case CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT:
        *driverStatus = cudaDriverEntryPointVersionNotSufficent;
        break;
      default: *driverStatus = cudaDriverEntryPointSymbolNotFound; break;
    }
  }
  return cudaSuccess;
}

}  // namespace

extern "C" {

// ---- Memory ----

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  if (devPtr == nullptr) return cudaErrorInvalidValue;
  if (size == 0) {  // the real runtime returns a null pointer without asking the driver
    const cudaError_t status = Driver().status;
    if (status == cudaSuccess) *devPtr = nullptr;
    return status;
  }
  return DriverCall("cudaMalloc", [&](const DriverApi& d) {
    CUdeviceptr p = 0;
    const CUresult result = d.mem_alloc(&p, size);
    if (result == CUDA_SUCCESS) *devPtr = reinterpret_cast<void*>(p);
    return result;
  });
}

cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  if (devPtr == nullptr || pitch == nullptr) return cudaErrorInvalidValue;
  return DriverCall("cudaMallocPitch", [&](const DriverApi& d) {
    CUdeviceptr p = 0;
    const CUresult result = d.mem_alloc_pitch(&p, pitch, width, height, 4);
    if (result == CUDA_SUCCESS) *devPtr = reinterpret_cast<void*>(p);
    return result;
  });
}

cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  if (devPtr == nullptr) return cudaErrorInvalidValue;
  return DriverCall("cudaMallocManaged", [&](const DriverApi& d) {
    CUdeviceptr p = 0;
    const CUresult result = d.mem_alloc_managed(&p, size, flags);
    if (result == CUDA_SUCCESS) *devPtr = reinterpret_cast<void*>(p);
    return result;
  });
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return DriverCall("cudaMallocHost", [&](const DriverApi& d) { return d.mem_alloc_host(ptr, size); });
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  return DriverCall("cudaHostAlloc", [&](const DriverApi& d) { return d.mem_host_alloc(pHost, size, flags); });
}

cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  return DriverCall("cudaHostRegister", [&](const DriverApi& d) { return d.mem_host_register(ptr, size, flags); });
}

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  if (devPtr == nullptr) return cudaErrorInvalidValue;
  return DriverCall("cudaMallocAsync", [&](const DriverApi& d) {
    CUdeviceptr p = 0;
    const CUresult result = d.mem_alloc_async(&p, size, hStream);
    if (result == CUDA_SUCCESS) *devPtr = reinterpret_cast<void*>(p);
    return result;
  });
}

cudaError_t cudaFree(void* devPtr) {
  if (devPtr == nullptr) return Driver().status;  // cudaFree(0): initializes the runtime, frees nothing
  return DriverCall("cudaFree",
                    [&](const DriverApi& d) { return d.mem_free(reinterpret_cast<CUdeviceptr>(devPtr)); });
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return Driver().status;
  return DriverCall("cudaFreeHost", [&](const DriverApi& d) { return d.mem_free_host(ptr); });
}

cudaError_t cudaHostUnregister(void* ptr) {
  return DriverCall("cudaHostUnregister", [&](const DriverApi& d) { return d.mem_host_unregister(ptr); });
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  return DriverCall("cudaFreeAsync", [&](const DriverApi& d) {
    return d.mem_free_async(reinterpret_cast<CUdeviceptr>(devPtr), hStream);
  });
}

// ---- Devices, streams, versions ----

cudaError_t cudaSetDevice(int device) {
  return DriverCall(nullptr, [&](const DriverApi& d) {
    CUdevice dev = 0;
    CUresult result = d.device_get(&dev, device);
    CUcontext context = nullptr;
    if (result == CUDA_SUCCESS) result = d.primary_ctx_retain(&context, dev);
    if (result == CUDA_SUCCESS) result = d.ctx_set_current(context);
    return result;
  });
}

cudaError_t cudaGetDevice(int* device) {
  return DriverCall(nullptr, [&](const DriverApi& d) { return d.ctx_get_device(device); });
}

cudaError_t cudaGetDeviceCount(int* count) {
  return DriverCall(nullptr, [&](const DriverApi& d) { return d.device_get_count(count); });
}

cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  return DriverCall(nullptr, [&](const DriverApi& d) { return d.stream_create(pStream, CU_STREAM_DEFAULT); });
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return DriverCall(nullptr, [&](const DriverApi& d) { return d.stream_destroy(stream); });
}

cudaError_t cudaDriverGetVersion(int* driverVersion) {
  return DriverCall(nullptr, [&](const DriverApi& d) { return d.driver_get_version(driverVersion); });
}

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (runtimeVersion == nullptr) return cudaErrorInvalidValue;
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}

// ---- Driver entry points: through the driver's cuGetProcAddress_v2, as the real runtime ----

cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                    cudaDriverEntryPointQueryResult* driverStatus) {
  return EntryPoint(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags, cudaDriverEntryPointQueryResult* driverStatus) {
  return EntryPoint(symbol, funcPtr, cudaVersion, flags, driverStatus);
}

// ---- Errors ----

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorDeviceUninitialized: return "cudaErrorDeviceUninitialized";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorSymbolNotFound: return "cudaErrorSymbolNotFound";
    case cudaErrorHostMemoryAlreadyRegistered: return "cudaErrorHostMemoryAlreadyRegistered";
    case cudaErrorHostMemoryNotRegistered: return "cudaErrorHostMemoryNotRegistered";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorUnknown: return "cudaErrorUnknown";
    default: return "unrecognized error code";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorHostMemoryAlreadyRegistered: return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered: return "pointer does not correspond to a registered memory region";
    default: return cudaGetErrorName(error);
  }
}

}  // extern "C"
