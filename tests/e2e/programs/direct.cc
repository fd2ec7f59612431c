// End-to-end test program (a): reaches the driver through its exported symbols. Linked against libcuda.so.1
// (DT_NEEDED), as a program built with -lcuda is; every call binds to the exported cu* name, so under the preload
// it reaches cumemtrace's exported hooks. With an argument, it first makes that folder and moves into it (as Hydra
// moves a training script into its output folder before the first CUDA call).
#include <sys/stat.h>
#include <unistd.h>

#include <cuda.h>

#include "direct_driver.h"
#include "program_support.h"

int main(int argc, char** argv) {
  if (argc > 1) {
    mkdir(argv[1], 0700);
    E2E_CHECK(chdir(argv[1]) == 0);
  }
  cumemtrace::e2e::RunDriverMix(cumemtrace::e2e::DirectDriver());

  // A few calls written out, not through the table: the plain direct-call form of a program linked with -lcuda.
  CUdeviceptr extra = 0;
  E2E_CHECK_CU(cuMemAlloc(&extra, 5 * cumemtrace::e2e::kMiB));
  void* host = nullptr;
  E2E_CHECK_CU(cuMemHostAlloc(&host, 128 * cumemtrace::e2e::kKiB, 0));
  E2E_CHECK_CU(cuMemFreeHost(host));
  E2E_CHECK_CU(cuMemFree(extra));
  return 0;
}
