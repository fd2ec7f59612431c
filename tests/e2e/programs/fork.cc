// End-to-end test program (h): fork, as a PyTorch DataLoader worker is made. The parent allocates and forks; the
// child allocates (at addresses the parent will also get, since it inherits the driver's state) and ends with
// _exit(0), so no exit handler runs in it; the parent waits and allocates more. The parent's trace must hold the
// parent's events only and end cleanly; the child must neither crash nor write into the parent's trace. With
// E2E_CHILD_LINGER_MS=<ms> the child waits that long before _exit (so a child trace's flush thread can write).
// E2E_PARENT_PAIRS=<n> and E2E_CHILD_PAIRS=<n> add n allocations and frees before the fork and in the child (enough
// batches that the parent's compression stream is in the middle of a frame when it forks).
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "program_support.h"

namespace {

namespace e2e = cumemtrace::e2e;

// `name`'s number of 4 KiB allocation/free pairs (0 when unset).
void Churn(const char* name) {
  const char* text = getenv(name);
  const int pairs = text == nullptr ? 0 : atoi(text);
  for (int i = 0; i < pairs; ++i) {
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, 4 * e2e::kKiB) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS) _exit(14);
  }
}

[[noreturn]] void RunChild(CUdeviceptr inherited) {
  CUdeviceptr p = 0;
  void* host = nullptr;
  if (cuMemAlloc(&p, 2 * e2e::kMiB) != CUDA_SUCCESS) _exit(10);
  if (cuMemHostAlloc(&host, 128 * e2e::kKiB, 0) != CUDA_SUCCESS) _exit(11);
  static_cast<char*>(host)[0] = 1;
  if (cuMemFree(inherited) != CUDA_SUCCESS) _exit(12);
  if (cuMemFree(p) != CUDA_SUCCESS) _exit(13);
  Churn("E2E_CHILD_PAIRS");
  const char* linger = getenv("E2E_CHILD_LINGER_MS");
  if (linger != nullptr) usleep(static_cast<useconds_t>(atoi(linger)) * 1000);
  _exit(0);  // like os._exit in a DataLoader worker: nothing at exit runs
}

}  // namespace

int main() {
  E2E_CHECK_CU(cuInit(0));
  CUdeviceptr a = 0, b = 0;
  void* pinned = nullptr;
  E2E_CHECK_CU(cuMemAlloc(&a, 1 * e2e::kMiB));
  E2E_CHECK_CU(cuMemAlloc(&b, 2 * e2e::kMiB));
  E2E_CHECK_CU(cuMemHostAlloc(&pinned, 64 * e2e::kKiB, CU_MEMHOSTALLOC_PORTABLE));
  Churn("E2E_PARENT_PAIRS");
  if (getenv("E2E_PARENT_PAIRS") != nullptr) usleep(200 * 1000);  // the flush thread writes the batches sealed

  const pid_t child = fork();
  E2E_CHECK(child >= 0);
  if (child == 0) RunChild(b);
  int status = 0;
  E2E_CHECK(waitpid(child, &status, 0) == child);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    e2e::Fail(__FILE__, __LINE__, "child exited cleanly", WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  }

  // After the child: the same addresses the child got, now in the parent.
  CUdeviceptr c = 0;
  E2E_CHECK_CU(cuMemAlloc(&c, 2 * e2e::kMiB));
  E2E_CHECK_CU(cuMemFree(a));
  CUdeviceptr big = 0;
  const CUresult big_result = cuMemAlloc(&big, e2e::kPlantedFailureBytes);
  if (big_result == CUDA_SUCCESS) {
    E2E_CHECK_CU(cuMemFree(big));
  } else {
    E2E_CHECK_RESULT(big_result, CUDA_ERROR_OUT_OF_MEMORY);
  }
  E2E_CHECK_CU(cuMemFreeHost(pinned));
  // Leaked on purpose: b, c.
  return 0;
}
