// driver_api.cu: a plain CUDA driver-API program (no runtime calls; linked with -lcuda, so it reaches the driver
// through libcuda's exported symbols) that allocates every kind of memory the driver API offers, frees all but one
// planted leak, and prints its own ledger of every allocation and free: the oracle for the GPU suite (tests/gpu/conftest.py)'s
// driver-API row (tests/gpu/test_*.py matches the ledger line by line against the trace's events).
//
//   nvcc -x c++ -cudart none -o driver_api tests/gpu/driver_api.cu -lcuda
//
// (-x c++: the file has no kernels, and compiled as CUDA it would register an empty fat binary, which needs a CUDA
// runtime; -cudart none: no runtime at all, so every call the trace sees is one this file makes.)
//
// Ledger lines (stdout), one per call, in call order:
//   LEDGER alloc <api> <kind> <device> <bytes> <0xaddress>   address: the pointer; for cuMemCreate the handle
//   LEDGER free <api> <0xaddress>                            the same address as the allocation it frees
//   PLANTED <function> <bytes> <0xaddress>                   the leak (also in the ledger as an alloc)
// api is the name without the _v2 suffix that cuda.h's macros add; kind is spelled as docs/format.md spells it.
// What is allocated: cuMemAlloc (device), cuMemAllocPitch (device, pitch x height bytes), cuMemAllocHost (pinned
// host, device -1), cuMemHostRegister (registered host, device -1), cuMemAllocManaged (managed),
// cuMemAddressReserve + cuMemCreate + cuMemMap (+ cuMemSetAccess) (address_reserve, vmm_physical, vmm_mapped), and
// cuMemAllocFromPoolAsync from a pool made with cuMemPoolCreate (pool). Planted: leak_driver_buffer() allocates
// 9 MiB with cuMemAlloc and never frees it.
//
// Exit status: 0 when every call succeeded, 1 on a driver error (the failing call is printed on stderr).
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(call)                                                                                  \
  do {                                                                                               \
    CUresult check_res_ = (call);                                                                    \
    if (check_res_ != CUDA_SUCCESS) {                                                                \
      const char* check_name_ = nullptr;                                                             \
      cuGetErrorName(check_res_, &check_name_);                                                      \
      std::fprintf(stderr, "driver_api: %s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,    \
                   check_name_ ? check_name_ : "?", static_cast<int>(check_res_));                   \
      std::exit(1);                                                                                  \
    }                                                                                                \
  } while (0)

namespace {

constexpr size_t kMiB = size_t{1} << 20;

void* g_leaked = nullptr;  // referenced, so nothing looks dead; still a leak (live at the end)

unsigned long long Addr(CUdeviceptr p) { return static_cast<unsigned long long>(p); }
unsigned long long Addr(const void* p) {
  return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p));
}

void LedgerAlloc(const char* api, const char* kind, int device, size_t bytes, unsigned long long address) {
  std::printf("LEDGER alloc %s %s %d %zu %#llx\n", api, kind, device, bytes, address);
}

void LedgerFree(const char* api, unsigned long long address) {
  std::printf("LEDGER free %s %#llx\n", api, address);
}

}  // namespace

// Not static, not inlined: its own frame and symbol in the leak's stack.
__attribute__((noinline)) void leak_driver_buffer() {
  CUdeviceptr p = 0;
  CHECK(cuMemAlloc(&p, 9 * kMiB));
  LedgerAlloc("cuMemAlloc", "device", 0, 9 * kMiB, Addr(p));
  std::printf("PLANTED leak_driver_buffer %zu %#llx\n", 9 * kMiB, Addr(p));
  CHECK(cuMemsetD8(p, 1, 9 * kMiB));
  g_leaked = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

__attribute__((noinline)) void device_memory() {
  CUdeviceptr p = 0;
  CHECK(cuMemAlloc(&p, 4 * kMiB));
  LedgerAlloc("cuMemAlloc", "device", 0, 4 * kMiB, Addr(p));
  CHECK(cuMemsetD32(p, 0x3f800000u, kMiB));
  CHECK(cuCtxSynchronize());
  LedgerFree("cuMemFree", Addr(p));
  CHECK(cuMemFree(p));

  CUdeviceptr pitched = 0;
  size_t pitch = 0;
  const size_t width = 1000, height = 100;
  CHECK(cuMemAllocPitch(&pitched, &pitch, width, height, 4));
  LedgerAlloc("cuMemAllocPitch", "device", 0, pitch * height, Addr(pitched));
  CHECK(cuMemsetD2D8(pitched, pitch, 0, width, height));
  CHECK(cuCtxSynchronize());
  LedgerFree("cuMemFree", Addr(pitched));
  CHECK(cuMemFree(pitched));
}

__attribute__((noinline)) void host_memory() {
  void* pinned = nullptr;
  CHECK(cuMemAllocHost(&pinned, 2 * kMiB));
  LedgerAlloc("cuMemAllocHost", "pinned_host", -1, 2 * kMiB, Addr(pinned));
  std::memset(pinned, 0, 2 * kMiB);
  LedgerFree("cuMemFreeHost", Addr(pinned));
  CHECK(cuMemFreeHost(pinned));

  const size_t bytes = kMiB;
  void* plain = std::aligned_alloc(4096, bytes);
  if (plain == nullptr) {
    std::fprintf(stderr, "driver_api: aligned_alloc failed\n");
    std::exit(1);
  }
  std::memset(plain, 0, bytes);
  CHECK(cuMemHostRegister(plain, bytes, 0));
  LedgerAlloc("cuMemHostRegister", "registered_host", -1, bytes, Addr(plain));
  LedgerFree("cuMemHostUnregister", Addr(plain));
  CHECK(cuMemHostUnregister(plain));
  std::free(plain);
}

__attribute__((noinline)) void managed_memory() {
  CUdeviceptr p = 0;
  CHECK(cuMemAllocManaged(&p, 64 * 1024, CU_MEM_ATTACH_GLOBAL));
  LedgerAlloc("cuMemAllocManaged", "managed", 0, 64 * 1024, Addr(p));
  CHECK(cuMemsetD8(p, 4, 64 * 1024));
  CHECK(cuCtxSynchronize());
  if (reinterpret_cast<unsigned char*>(static_cast<uintptr_t>(p))[100] != 4) {
    std::fprintf(stderr, "driver_api: managed memory does not read back\n");
    std::exit(1);
  }
  LedgerFree("cuMemFree", Addr(p));
  CHECK(cuMemFree(p));
}

__attribute__((noinline)) void virtual_memory(CUdevice device) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = static_cast<int>(device);
  size_t granularity = 0;
  CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const size_t bytes = 2 * granularity;

  CUdeviceptr va = 0;
  CHECK(cuMemAddressReserve(&va, 2 * bytes, 0, 0, 0));
  LedgerAlloc("cuMemAddressReserve", "address_reserve", 0, 2 * bytes, Addr(va));
  CUmemGenericAllocationHandle handle = 0;
  CHECK(cuMemCreate(&handle, bytes, &prop, 0));
  LedgerAlloc("cuMemCreate", "vmm_physical", 0, bytes, static_cast<unsigned long long>(handle));
  CHECK(cuMemMap(va, bytes, 0, handle, 0));
  LedgerAlloc("cuMemMap", "vmm_mapped", 0, bytes, Addr(va));
  CUmemAccessDesc access;
  std::memset(&access, 0, sizeof(access));
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK(cuMemSetAccess(va, bytes, &access, 1));
  CHECK(cuMemsetD8(va, 5, bytes));
  CHECK(cuCtxSynchronize());

  LedgerFree("cuMemUnmap", Addr(va));
  CHECK(cuMemUnmap(va, bytes));
  LedgerFree("cuMemRelease", static_cast<unsigned long long>(handle));
  CHECK(cuMemRelease(handle));
  LedgerFree("cuMemAddressFree", Addr(va));
  CHECK(cuMemAddressFree(va, 2 * bytes));
}

__attribute__((noinline)) void pool_memory(CUdevice device) {
  CUmemPoolProps props;
  std::memset(&props, 0, sizeof(props));
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = static_cast<int>(device);
  CUmemoryPool pool = nullptr;
  CHECK(cuMemPoolCreate(&pool, &props));
  CUstream stream = nullptr;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr p = 0;
  CHECK(cuMemAllocFromPoolAsync(&p, 6 * kMiB, pool, stream));
  LedgerAlloc("cuMemAllocFromPoolAsync", "pool", 0, 6 * kMiB, Addr(p));
  CHECK(cuMemsetD8Async(p, 6, 6 * kMiB, stream));
  LedgerFree("cuMemFreeAsync", Addr(p));
  CHECK(cuMemFreeAsync(p, stream));
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuStreamDestroy(stream));
  CHECK(cuMemPoolDestroy(pool));
}

int main() {
  CHECK(cuInit(0));
  CUdevice device = 0;
  CHECK(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));

  leak_driver_buffer();
  device_memory();
  host_memory();
  managed_memory();
  virtual_memory(device);
  pool_memory(device);

  std::printf("LEAKED_TOTAL %zu 1\n", 9 * kMiB);
  std::fflush(stdout);
  // The primary context is not released: the leak stays live to the end, as a leak does.
  return g_leaked != nullptr ? 0 : 1;
}
