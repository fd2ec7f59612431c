// End-to-end test program (r): the program's phases as NVTX ranges, through the real NVTX 3 header (header-only,
// linked against nothing: at its first call it loads the library NVTX_INJECTION64_PATH names, the preload). Nested
// ranges around fake-driver allocations, with known peaks per phase (tests/e2e/nvtx_phases_test.cc checks them):
//
//   setup    (pushed before the first CUDA memory call, so before tracing starts)  A 4 MiB, kept
//   train    3 x step { B 8 MiB, C 16 MiB, free C, free B }                      peak 4 + 8 + 16 = 28 MiB
//   validate D 2 MiB (kept: a leak of validate), E 1 MiB then freed, a failed 256 MiB request     peak 7 MiB
//
// plus a mark, a wide-character range, a start/end range ("epoch", around train and validate) and a domain range.
#include <cuda.h>
#include <nvtx3/nvToolsExt.h>

#include "direct_driver.h"
#include "program_support.h"

namespace {

CUdeviceptr Alloc(size_t bytes) {
  CUdeviceptr p = 0;
  E2E_CHECK_CU(cuMemAlloc(&p, bytes));
  return p;
}

}  // namespace

int main() {
  namespace e2e = cumemtrace::e2e;
  E2E_CHECK_CU(cuInit(0));
  nvtxRangePushA("setup");
  CUdeviceptr a = Alloc(4 * e2e::kMiB);
  nvtxRangePop();

  nvtxRangeId_t epoch = nvtxRangeStartA("epoch");
  nvtxRangePushA("train");
  for (int step = 0; step < 3; ++step) {
    nvtxRangePushA("step");
    CUdeviceptr b = Alloc(8 * e2e::kMiB);
    CUdeviceptr c = Alloc(16 * e2e::kMiB);
    E2E_CHECK_CU(cuMemFree(c));
    E2E_CHECK_CU(cuMemFree(b));
    nvtxRangePop();
  }
  nvtxMarkA("checkpoint");
  nvtxRangePop();

  nvtxRangePushW(L"validate");
  CUdeviceptr d = Alloc(2 * e2e::kMiB);
  CUdeviceptr e = Alloc(1 * e2e::kMiB);
  E2E_CHECK_CU(cuMemFree(e));
  CUdeviceptr failed = 0;
  E2E_CHECK_RESULT(cuMemAlloc(&failed, e2e::kPlantedFailureBytes), CUDA_ERROR_OUT_OF_MEMORY);
  nvtxRangePop();
  nvtxRangeEnd(epoch);

  nvtxDomainHandle_t domain = nvtxDomainCreateA("mylib");
  nvtxEventAttributes_t attributes = {};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attributes.message.registered = nvtxDomainRegisterStringA(domain, "mylib.work");
  nvtxDomainRangePushEx(domain, &attributes);
  E2E_CHECK_CU(cuMemFree(a));
  nvtxDomainRangePop(domain);
  // Leaked on purpose: d (allocated in validate).
  (void)d;
  return 0;
}
