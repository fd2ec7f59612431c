// End-to-end test program (m): exec. The parent allocates, forks a child that execs this program again with the
// argument "child" (as a launcher script, torchrun or multiprocessing's spawn start their workers), waits for it,
// and allocates more. The exec'd child allocates, frees, and exits normally. By default only the root process
// traces (the child finds another pid in CUMEMTRACE_ROOT_PID and its parent tracing, and stays passive); with
// CUMEMTRACE_FOLLOW_EXEC=1 the child writes its own trace.
//
// "wrap": the parent is a wrapper (timeout, bash, torchrun's launcher): it makes no CUDA call, starts the child and
// exits with its status; the child traces. "nested": the parent allocates, then starts "middle", a wrapper that
// starts the child; the child stays passive (a process above it traces).
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "program_support.h"

extern char** environ;

namespace {

namespace e2e = cumemtrace::e2e;

int RunExecdChild() {
  E2E_CHECK_CU(cuInit(0));
  CUdeviceptr p = 0, q = 0;
  void* host = nullptr;
  E2E_CHECK_CU(cuMemAlloc(&p, 3 * e2e::kMiB));
  E2E_CHECK_CU(cuMemHostAlloc(&host, 256 * e2e::kKiB, 0));
  E2E_CHECK_CU(cuMemAlloc(&q, 5 * e2e::kMiB));
  E2E_CHECK_CU(cuMemFree(p));
  E2E_CHECK_CU(cuMemFreeHost(host));
  // Leaked on purpose: q.
  return 0;
}

// Runs this program again with argument `role` in a child process and waits for it. Returns 0 when it exited
// with 0, else fails.
int RunAgain(char* self, const char* role) {
  const pid_t child = fork();
  E2E_CHECK(child >= 0);
  if (child == 0) {
    char* child_argv[] = {self, const_cast<char*>(role), nullptr};
    execve("/proc/self/exe", child_argv, environ);
    _exit(127);
  }
  int status = 0;
  E2E_CHECK(waitpid(child, &status, 0) == child);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    e2e::Fail(__FILE__, __LINE__, "exec'd child exited cleanly",
              WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* role = argc > 1 ? argv[1] : "";
  if (strcmp(role, "child") == 0) return RunExecdChild();
  if (strcmp(role, "wrap") == 0 || strcmp(role, "middle") == 0) return RunAgain(argv[0], "child");
  E2E_CHECK_CU(cuInit(0));
  CUdeviceptr a = 0;
  E2E_CHECK_CU(cuMemAlloc(&a, 1 * e2e::kMiB));

  RunAgain(argv[0], strcmp(role, "nested") == 0 ? "middle" : "child");
  CUdeviceptr b = 0;
  E2E_CHECK_CU(cuMemAlloc(&b, 2 * e2e::kMiB));
  E2E_CHECK_CU(cuMemFree(a));
  CUdeviceptr big = 0;
  const CUresult big_result = cuMemAlloc(&big, e2e::kPlantedFailureBytes);
  if (big_result == CUDA_SUCCESS) {
    E2E_CHECK_CU(cuMemFree(big));
  } else {
    E2E_CHECK_RESULT(big_result, CUDA_ERROR_OUT_OF_MEMORY);
  }
  // Leaked on purpose: b.
  return 0;
}
