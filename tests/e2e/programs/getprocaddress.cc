// End-to-end test program (c): reaches the driver through cuGetProcAddress: dlopen + dlsym("cuGetProcAddress_v2"),
// then every function by its base name (CUDA 13.0, default flags). Also one lookup through the legacy 4-argument
// cuGetProcAddress, one through the cuGetProcAddress pointer that cuGetProcAddress itself returned, one with the
// per-thread-default-stream flag, and an unknown name (whose failure must reach the program unchanged).
#include <cuda.h>

#include "program_support.h"

namespace {

namespace e2e = cumemtrace::e2e;

template <typename F>
F Lookup(e2e::GetProcAddressFn get_proc_address, const char* name, cuuint64_t flags) {
  void* function = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  E2E_CHECK_CU(get_proc_address(name, &function, 13000, flags, &status));
  E2E_CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS && function != nullptr);
  return reinterpret_cast<F>(function);
}

}  // namespace

int main() {
  void* driver = e2e::OpenDriver();
  auto get_proc_address = reinterpret_cast<e2e::GetProcAddressFn>(e2e::Symbol(driver, "cuGetProcAddress_v2"));
  e2e::DriverApi cu;
  e2e::FillByGetProcAddress(get_proc_address, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &cu);
  e2e::RunDriverMix(cu);

  // Legacy cuGetProcAddress (4 arguments), as runtimes before CUDA 12 call it.
  auto legacy = reinterpret_cast<e2e::LegacyGetProcAddressFn>(e2e::Symbol(driver, "cuGetProcAddress"));
  void* alloc = nullptr;
  void* free_fn = nullptr;
  E2E_CHECK_CU(legacy("cuMemAlloc", &alloc, 12000, CU_GET_PROC_ADDRESS_DEFAULT));
  E2E_CHECK_CU(legacy("cuMemFree", &free_fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT));
  CUdeviceptr p = 0;
  E2E_CHECK_CU(reinterpret_cast<decltype(&cuMemAlloc_v2)>(alloc)(&p, 8 * e2e::kMiB));
  E2E_CHECK_CU(reinterpret_cast<decltype(&cuMemFree_v2)>(free_fn)(p));

  // cuGetProcAddress asked for itself, then used.
  auto again = Lookup<e2e::GetProcAddressFn>(get_proc_address, "cuGetProcAddress", CU_GET_PROC_ADDRESS_DEFAULT);
  auto host_alloc = Lookup<decltype(&cuMemHostAlloc)>(again, "cuMemHostAlloc", CU_GET_PROC_ADDRESS_DEFAULT);
  auto free_host = Lookup<decltype(&cuMemFreeHost)>(again, "cuMemFreeHost", CU_GET_PROC_ADDRESS_DEFAULT);
  void* host = nullptr;
  E2E_CHECK_CU(host_alloc(&host, 96 * e2e::kKiB, CU_MEMHOSTALLOC_PORTABLE));
  E2E_CHECK_CU(free_host(host));

  // Per-thread default stream: the driver hands out the _ptsz variants.
  auto alloc_ptsz = Lookup<decltype(&cuMemAllocAsync)>(get_proc_address, "cuMemAllocAsync",
                                                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  auto free_ptsz = Lookup<decltype(&cuMemFreeAsync)>(get_proc_address, "cuMemFreeAsync",
                                                    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  CUdeviceptr q = 0;
  E2E_CHECK_CU(alloc_ptsz(&q, 640 * e2e::kKiB, CU_STREAM_PER_THREAD));
  E2E_CHECK_CU(free_ptsz(q, CU_STREAM_PER_THREAD));

  // An unknown name: exactly the driver's answer.
  void* missing = &missing;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  E2E_CHECK_RESULT(get_proc_address("cuNoSuchFunction", &missing, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status),
                   CUDA_ERROR_NOT_FOUND);
  E2E_CHECK(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && missing == nullptr);
  return 0;
}
