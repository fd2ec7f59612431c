// End-to-end test program (l): CUPTI as a second source. Some memory calls reach the driver through its exported
// symbols or the runtime (interposition sees them, and so does CUPTI), others through the fake driver's internal
// path (FakeCudaInternalAlloc / FakeCudaInternalFree: only CUPTI sees them, as with a library that reaches the
// driver through a private export table). The internal allocations have a size nothing else uses
// (kInternalBytes), so the tests can tell them apart in the ledger. Under CUMEMTRACE_CUPTI=1 each call must be
// recorded exactly once, the internal ones marked cupti_only.
//
// With E2E_OWN_CUPTI=<path of a libcupti.so*>, the program first loads that library itself and subscribes, as
// torch.profiler would: cumemtrace must then use that very library (and find it taken), not load another copy.
#include <cupti.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "fake_cuda_control.h"
#include "program_support.h"

namespace {

namespace e2e = cumemtrace::e2e;

constexpr size_t kInternalBytes = 3 * e2e::kMiB + 7 * 512;  // the tests use the same value

void CUPTIAPI IgnoreCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// Loads the library at `path` and subscribes to it, as a profiler in the program would.
void SubscribeFirst(const char* path) {
  void* cupti = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  E2E_CHECK(cupti != nullptr);
  using SubscribeFn = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
  auto subscribe = reinterpret_cast<SubscribeFn>(dlsym(cupti, "cuptiSubscribe"));
  E2E_CHECK(subscribe != nullptr);
  CUpti_SubscriberHandle handle = nullptr;
  E2E_CHECK_RESULT(subscribe(&handle, IgnoreCallback, nullptr), CUPTI_SUCCESS);
}

}  // namespace

int main() {
  const char* own_cupti = getenv("E2E_OWN_CUPTI");
  if (own_cupti != nullptr) SubscribeFirst(own_cupti);
  E2E_CHECK_CU(cuInit(0));
  CUdeviceptr a = 0;
  E2E_CHECK_CU(cuMemAlloc(&a, 1 * e2e::kMiB));
  void* host = nullptr;
  E2E_CHECK_CU(cuMemHostAlloc(&host, 64 * e2e::kKiB, 0));

  CUdeviceptr hidden = 0;
  E2E_CHECK_CU(FakeCudaInternalAlloc(&hidden, kInternalBytes));
  void* r = nullptr;
  E2E_CHECK_RESULT(cudaMalloc(&r, 2 * e2e::kMiB), cudaSuccess);
  E2E_CHECK_CU(cuMemFree(a));
  E2E_CHECK_CU(FakeCudaInternalFree(hidden));
  CUdeviceptr leaked = 0;
  E2E_CHECK_CU(FakeCudaInternalAlloc(&leaked, kInternalBytes));
  E2E_CHECK_RESULT(cudaFree(r), cudaSuccess);
  E2E_CHECK_CU(cuMemFreeHost(host));

  CUdeviceptr big = 0;
  const CUresult big_result = cuMemAlloc(&big, e2e::kPlantedFailureBytes);
  if (big_result == CUDA_SUCCESS) {
    E2E_CHECK_CU(cuMemFree(big));
  } else {
    E2E_CHECK_RESULT(big_result, CUDA_ERROR_OUT_OF_MEMORY);
  }
  // Leaked on purpose: leaked.
  return 0;
}
