// End-to-end test program (n): allocations spread over time, for the memory-sample interval. Forty rounds, 10 ms
// apart, each allocating on device 0 and freeing the previous round's allocation; one allocation stays live.
#include <unistd.h>

#include <cuda.h>

#include "program_support.h"

int main() {
  namespace e2e = cumemtrace::e2e;
  E2E_CHECK_CU(cuInit(0));
  CUdeviceptr previous = 0;
  for (int round = 0; round < 40; ++round) {
    CUdeviceptr p = 0;
    E2E_CHECK_CU(cuMemAlloc(&p, (1 + round % 5) * e2e::kMiB));
    if (previous != 0) E2E_CHECK_CU(cuMemFree(previous));
    previous = p;
    usleep(10 * 1000);
  }
  // Leaked on purpose: previous.
  return 0;
}
