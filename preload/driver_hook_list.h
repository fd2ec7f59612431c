// The hooked driver functions, one X() per exported symbol:
//   X(Id, exported_symbol, "base name asked of cuGetProcAddress", min_version, max_version, params, args)
// The version range is the cuGetProcAddress ABI version range whose functions have this symbol's signature (the
// _v2 functions replaced 32-bit ones in CUDA 3.2; cuGetProcAddress gained its fifth argument in 12.0).
#ifndef CUMEMTRACE_PRELOAD_DRIVER_HOOK_LIST_H_
#define CUMEMTRACE_PRELOAD_DRIVER_HOOK_LIST_H_

#define CUMEMTRACE_DRIVER_HOOKS(X)                                                                              \
  X(MemAlloc, cuMemAlloc_v2, "cuMemAlloc", 3020, 1 << 30, (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize)) \
  X(MemAllocPitch, cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 1 << 30,                                       \
    (CUdeviceptr * dptr, size_t * pitch, size_t width, size_t height, unsigned int element),                  \
    (dptr, pitch, width, height, element))                                                                     \
  X(MemAllocManaged, cuMemAllocManaged, "cuMemAllocManaged", 0, 1 << 30,                                      \
    (CUdeviceptr * dptr, size_t bytesize, unsigned int flags), (dptr, bytesize, flags))                       \
  X(MemAllocHost, cuMemAllocHost_v2, "cuMemAllocHost", 3020, 1 << 30, (void** pp, size_t bytesize), (pp, bytesize)) \
  X(MemHostAlloc, cuMemHostAlloc, "cuMemHostAlloc", 0, 1 << 30, (void** pp, size_t bytesize, unsigned int flags), \
    (pp, bytesize, flags))                                                                                     \
  X(MemHostRegister, cuMemHostRegister_v2, "cuMemHostRegister", 0, 1 << 30,                                    \
    (void* p, size_t bytesize, unsigned int flags), (p, bytesize, flags))                                     \
  X(MemAllocAsync, cuMemAllocAsync, "cuMemAllocAsync", 0, 1 << 30,                                            \
    (CUdeviceptr * dptr, size_t bytesize, CUstream stream), (dptr, bytesize, stream))                         \
  X(MemAllocAsyncPtsz, cuMemAllocAsync_ptsz, "cuMemAllocAsync", 0, 1 << 30,                                   \
    (CUdeviceptr * dptr, size_t bytesize, CUstream stream), (dptr, bytesize, stream))                         \
  X(MemAllocFromPoolAsync, cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 0, 1 << 30,                    \
    (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream stream), (dptr, bytesize, pool, stream)) \
  X(MemAllocFromPoolAsyncPtsz, cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 0, 1 << 30,           \
    (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream stream), (dptr, bytesize, pool, stream)) \
  X(MemCreate, cuMemCreate, "cuMemCreate", 0, 1 << 30,                                                        \
    (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp* prop,                     \
     unsigned long long flags),                                                                               \
    (handle, size, prop, flags))                                                                              \
  X(MemAddressReserve, cuMemAddressReserve, "cuMemAddressReserve", 0, 1 << 30,                                \
    (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags),           \
    (ptr, size, alignment, addr, flags))                                                                      \
  X(MemMap, cuMemMap, "cuMemMap", 0, 1 << 30,                                                                 \
    (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,                        \
     unsigned long long flags),                                                                               \
    (ptr, size, offset, handle, flags))                                                                       \
  X(MemFree, cuMemFree_v2, "cuMemFree", 3020, 1 << 30, (CUdeviceptr dptr), (dptr))                           \
  X(MemFreeHost, cuMemFreeHost, "cuMemFreeHost", 0, 1 << 30, (void* p), (p))                                 \
  X(MemHostUnregister, cuMemHostUnregister, "cuMemHostUnregister", 0, 1 << 30, (void* p), (p))               \
  X(MemFreeAsync, cuMemFreeAsync, "cuMemFreeAsync", 0, 1 << 30, (CUdeviceptr dptr, CUstream stream),         \
    (dptr, stream))                                                                                           \
  X(MemFreeAsyncPtsz, cuMemFreeAsync_ptsz, "cuMemFreeAsync", 0, 1 << 30, (CUdeviceptr dptr, CUstream stream), \
    (dptr, stream))                                                                                           \
  X(MemRelease, cuMemRelease, "cuMemRelease", 0, 1 << 30, (CUmemGenericAllocationHandle handle), (handle))   \
  X(MemAddressFree, cuMemAddressFree, "cuMemAddressFree", 0, 1 << 30, (CUdeviceptr ptr, size_t size),        \
    (ptr, size))                                                                                              \
  X(MemUnmap, cuMemUnmap, "cuMemUnmap", 0, 1 << 30, (CUdeviceptr ptr, size_t size), (ptr, size))             \
  X(GetProcAddressLegacy, cuGetProcAddress, "cuGetProcAddress", 0, 12000,                                     \
    (const char* symbol, void** pfn, int version, cuuint64_t flags), (symbol, pfn, version, flags))          \
  X(GetProcAddress, cuGetProcAddress_v2, "cuGetProcAddress", 12000, 1 << 30,                                  \
    (const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status), \
    (symbol, pfn, version, flags, status))

#endif  // CUMEMTRACE_PRELOAD_DRIVER_HOOK_LIST_H_
