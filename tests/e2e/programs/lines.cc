// End-to-end test program (l): built with -g -O0 (tests/e2e/CMakeLists.txt) so that its own functions have file and
// line in DWARF. Each call whose line a test expects is marked with a comment "e2e-line: NAME"; the tests find the
// line numbers by reading this file, not from the tool. It keeps one allocation live (a leak), frees another, and
// makes one planted failed request (the oom report). Arguments are ignored (the redact test passes paths).
#include <cuda.h>

#include "program_support.h"

namespace {

using cumemtrace::e2e::kMiB;

__attribute__((noinline)) CUdeviceptr AllocateKept(size_t bytes) {
  CUdeviceptr p = 0;
  const CUresult result = cuMemAlloc(&p, bytes);  // e2e-line: kept
  E2E_CHECK_CU(result);
  return p;
}

__attribute__((noinline)) void AllocateAndFree(size_t bytes) {
  CUdeviceptr p = 0;
  const CUresult result = cuMemAlloc(&p, bytes);  // e2e-line: freed
  E2E_CHECK_CU(result);
  E2E_CHECK_CU(cuMemFree(p));
}

__attribute__((noinline)) void RequestTooMuch() {
  CUdeviceptr p = 0;
  const CUresult result = cuMemAlloc(&p, cumemtrace::e2e::kPlantedFailureBytes);  // e2e-line: failed
  E2E_CHECK(result != CUDA_SUCCESS);
}

}  // namespace

int main() {
  E2E_CHECK_CU(cuInit(0));
  CUdevice device = -1;
  E2E_CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  E2E_CHECK_CU(cuDevicePrimaryCtxRetain(&context, device));
  E2E_CHECK_CU(cuCtxSetCurrent(context));
  AllocateAndFree(3 * kMiB);
  const CUdeviceptr kept = AllocateKept(2 * kMiB);  // e2e-line: main-kept
  RequestTooMuch();
  E2E_CHECK(kept != 0);
  return 0;
}
