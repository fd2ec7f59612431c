// Shared code of the end-to-end test programs (see the header): failure reporting, filling the driver table, and
// the fixed mix of driver memory calls.
#include "program_support.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace cumemtrace::e2e {

void Fail(const char* file, int line, const char* what, long long got) {
  fprintf(stderr, "%s:%d: check failed: %s (got %lld)\n", file, line, what, got);
  fflush(stderr);
  exit(1);
}

void* OpenDriver() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    fprintf(stderr, "dlopen(libcuda.so.1): %s\n", dlerror());
    exit(1);
  }
  return handle;
}

void* Symbol(void* handle, const char* name) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    fprintf(stderr, "dlsym(%s): %s\n", name, dlerror());
    exit(1);
  }
  return symbol;
}

void FillByDlsym(void* handle, DriverApi* api) {
#define E2E_FILL_BY_DLSYM(member, base_name, exported_name, prototype) \
  api->member = reinterpret_cast<decltype(api->member)>(Symbol(handle, exported_name));
  E2E_DRIVER_FUNCTIONS(E2E_FILL_BY_DLSYM)
#undef E2E_FILL_BY_DLSYM
}

void FillByGetProcAddress(GetProcAddressFn get_proc_address, int cuda_version, cuuint64_t flags, DriverApi* api) {
#define E2E_FILL_BY_GPA(member, base_name, exported_name, prototype)                             \
  {                                                                                               \
    void* function = nullptr;                                                                     \
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                 \
    E2E_CHECK_CU(get_proc_address(base_name, &function, cuda_version, flags, &status));           \
    E2E_CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS && function != nullptr);                      \
    api->member = reinterpret_cast<decltype(api->member)>(function);                              \
  }
  E2E_DRIVER_FUNCTIONS(E2E_FILL_BY_GPA)
#undef E2E_FILL_BY_GPA
}

void RunDriverMix(const DriverApi& cu) {
  E2E_CHECK_CU(cu.init(0));
  CUdevice device = -1;
  E2E_CHECK_CU(cu.device_get(&device, 0));
  CUcontext context = nullptr;
  E2E_CHECK_CU(cu.primary_ctx_retain(&context, device));
  E2E_CHECK_CU(cu.ctx_set_current(context));

  // Device memory: a freed address is handed out again to the next request of the same size.
  CUdeviceptr a = 0, b = 0, c = 0, d = 0;
  E2E_CHECK_CU(cu.mem_alloc(&a, 1 * kMiB));
  E2E_CHECK_CU(cu.mem_alloc(&b, 3 * kMiB + 100));
  E2E_CHECK_CU(cu.mem_alloc(&c, 4 * kKiB));
  E2E_CHECK_CU(cu.mem_free(a));
  E2E_CHECK_CU(cu.mem_alloc(&d, 1 * kMiB));
  E2E_CHECK(d == a);

  CUdeviceptr pitched = 0;
  size_t pitch = 0;
  E2E_CHECK_CU(cu.mem_alloc_pitch(&pitched, &pitch, 1000, 64, 4));
  E2E_CHECK(pitch >= 1000);
  CUdeviceptr managed = 0;
  E2E_CHECK_CU(cu.mem_alloc_managed(&managed, 2 * kMiB, CU_MEM_ATTACH_GLOBAL));

  // Pinned host memory is real memory.
  void* pinned_small = nullptr;
  void* pinned_big = nullptr;
  E2E_CHECK_CU(cu.mem_alloc_host(&pinned_small, 64 * kKiB));
  E2E_CHECK_CU(cu.mem_host_alloc(&pinned_big, 1 * kMiB, CU_MEMHOSTALLOC_PORTABLE));
  memset(pinned_small, 1, 64 * kKiB);
  memset(pinned_big, 2, 1 * kMiB);

  std::vector<char> staging(256 * kKiB);
  E2E_CHECK_CU(cu.mem_host_register(staging.data(), staging.size(), CU_MEMHOSTREGISTER_PORTABLE));
  E2E_CHECK_CU(cu.mem_host_unregister(staging.data()));

  // Stream-ordered memory.
  CUstream stream = nullptr;
  E2E_CHECK_CU(cu.stream_create(&stream, CU_STREAM_NON_BLOCKING));
  CUmemoryPool pool = nullptr;
  E2E_CHECK_CU(cu.default_mem_pool(&pool, device));
  CUdeviceptr async = 0, pooled = 0;
  E2E_CHECK_CU(cu.mem_alloc_async(&async, 2 * kMiB, stream));
  E2E_CHECK_CU(cu.mem_alloc_from_pool_async(&pooled, 1 * kMiB, pool, stream));
  E2E_CHECK_CU(cu.mem_free_async(async, stream));

  // Virtual memory management: two physical handles mapped into one reservation, one of them cleaned up.
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granularity = 0;
  E2E_CHECK_CU(cu.allocation_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemGenericAllocationHandle first = 0, second = 0;
  E2E_CHECK_CU(cu.mem_create(&first, 2 * granularity, &prop, 0));
  E2E_CHECK_CU(cu.mem_create(&second, granularity, &prop, 0));
  CUdeviceptr range = 0;
  E2E_CHECK_CU(cu.mem_address_reserve(&range, 4 * granularity, 0, 0, 0));
  E2E_CHECK_CU(cu.mem_map(range, 2 * granularity, 0, first, 0));
  E2E_CHECK_CU(cu.mem_map(range + 2 * granularity, granularity, 0, second, 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  E2E_CHECK_CU(cu.set_access(range, 3 * granularity, &access, 1));
  E2E_CHECK_CU(cu.mem_unmap(range, 2 * granularity));
  E2E_CHECK_CU(cu.mem_release(first));

  // The planted failure: fails when FAKE_CUDA_FAIL_ABOVE is below it, and then exactly with out-of-memory.
  CUdeviceptr big = 0;
  const CUresult big_result = cu.mem_alloc(&big, kPlantedFailureBytes);
  if (big_result == CUDA_SUCCESS) {
    E2E_CHECK_CU(cu.mem_free(big));
  } else {
    E2E_CHECK_RESULT(big_result, CUDA_ERROR_OUT_OF_MEMORY);
  }

  E2E_CHECK_CU(cu.mem_free(c));
  E2E_CHECK_CU(cu.mem_free(d));
  E2E_CHECK_CU(cu.mem_free(pitched));
  E2E_CHECK_CU(cu.mem_free_host(pinned_small));
  E2E_CHECK_CU(cu.stream_destroy(stream));
  // Leaked on purpose: b, managed, pinned_big, pooled, the second handle, its mapping and the reservation.
}

}  // namespace cumemtrace::e2e
