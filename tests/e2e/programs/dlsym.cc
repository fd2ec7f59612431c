// End-to-end test program (b): reaches the driver the way JAX/XLA does: dlopen("libcuda.so.1", RTLD_NOW |
// RTLD_LOCAL) and dlsym for each function by its exported name (including a _ptsz variant). Not linked against
// libcuda, so only cumemtrace's dlsym hook can see these calls.
#include <cuda.h>

#include "program_support.h"

int main() {
  namespace e2e = cumemtrace::e2e;
  void* driver = e2e::OpenDriver();
  e2e::DriverApi cu;
  e2e::FillByDlsym(driver, &cu);
  e2e::RunDriverMix(cu);

  // The per-thread-default-stream variants, as code compiled with --default-stream per-thread names them.
  auto alloc_ptsz = reinterpret_cast<decltype(&cuMemAllocAsync)>(e2e::Symbol(driver, "cuMemAllocAsync_ptsz"));
  auto free_ptsz = reinterpret_cast<decltype(&cuMemFreeAsync)>(e2e::Symbol(driver, "cuMemFreeAsync_ptsz"));
  CUdeviceptr p = 0;
  E2E_CHECK_CU(alloc_ptsz(&p, 768 * e2e::kKiB, CU_STREAM_PER_THREAD));
  E2E_CHECK_CU(free_ptsz(p, CU_STREAM_PER_THREAD));
  return 0;
}
