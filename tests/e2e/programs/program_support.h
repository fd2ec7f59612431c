// Shared code of the end-to-end test programs: the table of driver functions a program calls through, the ways of
// filling it (dlsym on a libcuda handle, cuGetProcAddress), and the fixed, deterministic mix of memory calls that
// several programs make, each reaching the driver its own way.
//
// Why this exists: every program must do the same kind of work (several sizes, some freed, an address reused after
// a free, a planted failure, some leaks) so that the only difference between them is how they reach the driver,
// which is what the e2e tests are about. The programs never print what a test checks: the fake driver's ledger is
// the oracle. They print to stderr and exit 1 when something they assert does not hold.
#ifndef CUMEMTRACE_TESTS_E2E_PROGRAMS_PROGRAM_SUPPORT_H_
#define CUMEMTRACE_TESTS_E2E_PROGRAMS_PROGRAM_SUPPORT_H_

#include <cuda.h>

#include <cstddef>
#include <cstdint>

namespace cumemtrace::e2e {

inline constexpr size_t kKiB = size_t{1} << 10;
inline constexpr size_t kMiB = size_t{1} << 20;
// The e2e tests run the programs with FAKE_CUDA_FAIL_ABOVE below this and every other request below that.
inline constexpr size_t kPlantedFailureBytes = 256 * kMiB;

[[noreturn]] void Fail(const char* file, int line, const char* what, long long got);

// Exits 1 (with a message on stderr) unless `condition` holds.
#define E2E_CHECK(condition)                                                   \
  do {                                                                         \
    if (!(condition)) ::cumemtrace::e2e::Fail(__FILE__, __LINE__, #condition, 0); \
  } while (0)

// Exits 1 unless `call` returns `expected` (a CUresult or cudaError_t).
#define E2E_CHECK_RESULT(call, expected)                                                      \
  do {                                                                                        \
    const long long e2e_result = static_cast<long long>(call);                                \
    if (e2e_result != static_cast<long long>(expected)) {                                     \
      ::cumemtrace::e2e::Fail(__FILE__, __LINE__, #call " == " #expected, e2e_result);        \
    }                                                                                         \
  } while (0)

#define E2E_CHECK_CU(call) E2E_CHECK_RESULT(call, CUDA_SUCCESS)

// The driver functions the programs use: member, base name (what cuGetProcAddress and cudart's entry points are
// asked for), exported name (what dlsym is asked for), prototype in cuda.h.
#define E2E_DRIVER_FUNCTIONS(X)                                                                          \
  X(init, "cuInit", "cuInit", cuInit)                                                                    \
  X(device_get, "cuDeviceGet", "cuDeviceGet", cuDeviceGet)                                               \
  X(primary_ctx_retain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain) \
  X(ctx_set_current, "cuCtxSetCurrent", "cuCtxSetCurrent", cuCtxSetCurrent)                              \
  X(stream_create, "cuStreamCreate", "cuStreamCreate", cuStreamCreate)                                   \
  X(stream_destroy, "cuStreamDestroy", "cuStreamDestroy_v2", cuStreamDestroy_v2)                         \
  X(default_mem_pool, "cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool", cuDeviceGetDefaultMemPool) \
  X(allocation_granularity, "cuMemGetAllocationGranularity", "cuMemGetAllocationGranularity",             \
    cuMemGetAllocationGranularity)                                                                       \
  X(set_access, "cuMemSetAccess", "cuMemSetAccess", cuMemSetAccess)                                      \
  X(mem_alloc, "cuMemAlloc", "cuMemAlloc_v2", cuMemAlloc_v2)                                             \
  X(mem_alloc_pitch, "cuMemAllocPitch", "cuMemAllocPitch_v2", cuMemAllocPitch_v2)                        \
  X(mem_alloc_managed, "cuMemAllocManaged", "cuMemAllocManaged", cuMemAllocManaged)                      \
  X(mem_alloc_host, "cuMemAllocHost", "cuMemAllocHost_v2", cuMemAllocHost_v2)                            \
  X(mem_host_alloc, "cuMemHostAlloc", "cuMemHostAlloc", cuMemHostAlloc)                                  \
  X(mem_host_register, "cuMemHostRegister", "cuMemHostRegister_v2", cuMemHostRegister_v2)                \
  X(mem_alloc_async, "cuMemAllocAsync", "cuMemAllocAsync", cuMemAllocAsync)                              \
  X(mem_alloc_from_pool_async, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync) \
  X(mem_create, "cuMemCreate", "cuMemCreate", cuMemCreate)                                               \
  X(mem_address_reserve, "cuMemAddressReserve", "cuMemAddressReserve", cuMemAddressReserve)              \
  X(mem_map, "cuMemMap", "cuMemMap", cuMemMap)                                                           \
  X(mem_free, "cuMemFree", "cuMemFree_v2", cuMemFree_v2)                                                 \
  X(mem_free_host, "cuMemFreeHost", "cuMemFreeHost", cuMemFreeHost)                                      \
  X(mem_host_unregister, "cuMemHostUnregister", "cuMemHostUnregister", cuMemHostUnregister)              \
  X(mem_free_async, "cuMemFreeAsync", "cuMemFreeAsync", cuMemFreeAsync)                                  \
  X(mem_release, "cuMemRelease", "cuMemRelease", cuMemRelease)                                           \
  X(mem_address_free, "cuMemAddressFree", "cuMemAddressFree", cuMemAddressFree)                          \
  X(mem_unmap, "cuMemUnmap", "cuMemUnmap", cuMemUnmap)

struct DriverApi {
#define E2E_DRIVER_MEMBER(member, base_name, exported_name, prototype) decltype(&prototype) member = nullptr;
  E2E_DRIVER_FUNCTIONS(E2E_DRIVER_MEMBER)
#undef E2E_DRIVER_MEMBER
};

using GetProcAddressFn = decltype(&cuGetProcAddress_v2);
// cuGetProcAddress as exported before CUDA 12 (4 arguments); cuda.h names only the _v2 one.
using LegacyGetProcAddressFn = CUresult (*)(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);

// dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL), as the runtime, JAX and CuPy do; exits 1 if it fails.
void* OpenDriver();

// dlsym(handle, name); exits 1 if the symbol is missing.
void* Symbol(void* handle, const char* name);

// Fills every member with dlsym(handle, exported name).
void FillByDlsym(void* handle, DriverApi* api);

// Fills every member with get_proc_address(base name, cuda_version, flags); exits 1 on any failure.
void FillByGetProcAddress(GetProcAddressFn get_proc_address, int cuda_version, cuuint64_t flags, DriverApi* api);

// The fixed mix of driver memory calls (device, pitch, managed, pinned, registered, stream-ordered, pool, virtual
// memory; one freed address handed out again; one kPlantedFailureBytes request that fails when the fake is told
// to; some allocations leaked on purpose). Initializes the driver and makes device 0 current first.
void RunDriverMix(const DriverApi& cu);

}  // namespace cumemtrace::e2e

#endif  // CUMEMTRACE_TESTS_E2E_PROGRAMS_PROGRAM_SUPPORT_H_
