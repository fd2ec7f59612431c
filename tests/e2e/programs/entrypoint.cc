// End-to-end test program (e): driver functions obtained from the shared runtime's entry points, as PyTorch's
// expandable segments obtain cuMemCreate/cuMemMap (cudaGetDriverEntryPointByVersion) and older code does with the
// deprecated cudaGetDriverEntryPoint. Linked against libcudart.so.13 only; the runtime asks the driver's
// cuGetProcAddress underneath, and every call through these pointers must be recorded exactly once.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "program_support.h"

namespace {

namespace e2e = cumemtrace::e2e;

void* ByVersion(const char* name, unsigned long long flags) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  E2E_CHECK_RESULT(cudaGetDriverEntryPointByVersion(name, &function, 13000, flags, &status), cudaSuccess);
  E2E_CHECK(status == cudaDriverEntryPointSuccess && function != nullptr);
  return function;
}

void* Deprecated(const char* name) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  E2E_CHECK_RESULT(cudaGetDriverEntryPoint(name, &function, cudaEnableDefault, &status), cudaSuccess);
#pragma GCC diagnostic pop
  E2E_CHECK(status == cudaDriverEntryPointSuccess && function != nullptr);
  return function;
}

}  // namespace

int main() {
  e2e::DriverApi cu;
#define E2E_FILL_BY_ENTRY_POINT(member, base_name, exported_name, prototype) \
  cu.member = reinterpret_cast<decltype(cu.member)>(ByVersion(base_name, cudaEnableDefault));
  E2E_DRIVER_FUNCTIONS(E2E_FILL_BY_ENTRY_POINT)
#undef E2E_FILL_BY_ENTRY_POINT
  // A few through the deprecated entry point instead.
  cu.mem_alloc = reinterpret_cast<decltype(cu.mem_alloc)>(Deprecated("cuMemAlloc"));
  cu.mem_free = reinterpret_cast<decltype(cu.mem_free)>(Deprecated("cuMemFree"));
  cu.mem_host_alloc = reinterpret_cast<decltype(cu.mem_host_alloc)>(Deprecated("cuMemHostAlloc"));
  e2e::RunDriverMix(cu);

  // Per-thread default stream through the runtime's entry point: the driver's _ptsz variants.
  auto alloc_ptsz =
      reinterpret_cast<decltype(&cuMemAllocAsync)>(ByVersion("cuMemAllocAsync", cudaEnablePerThreadDefaultStream));
  auto free_ptsz =
      reinterpret_cast<decltype(&cuMemFreeAsync)>(ByVersion("cuMemFreeAsync", cudaEnablePerThreadDefaultStream));
  CUdeviceptr p = 0;
  E2E_CHECK_CU(alloc_ptsz(&p, 384 * e2e::kKiB, CU_STREAM_PER_THREAD));
  E2E_CHECK_CU(free_ptsz(p, CU_STREAM_PER_THREAD));
  return 0;
}
