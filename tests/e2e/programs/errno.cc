// End-to-end test program (i): tracing must not change what the program sees. It asserts that errno set before a
// hooked call (successful or failing, driver or runtime) is unchanged after it, that failing calls return exactly
// what the fake driver returns, that pointers are what the driver handed out (reuse after a free), and it ends with
// exit code 3 on purpose, so the tests can check that the traced exit code is preserved (and that a trace is still
// finished cleanly when main returns non-zero).
#include <errno.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "program_support.h"

namespace {

namespace e2e = cumemtrace::e2e;

constexpr int kErrno = 4242;
constexpr size_t kTooMuch = size_t{1} << 40;  // more than any fake device has
constexpr CUdeviceptr kNotAllocated = 0xdead0000;

}  // namespace

int main() {
  errno = kErrno;
  E2E_CHECK_CU(cuInit(0));
  E2E_CHECK(errno == kErrno);

  CUdeviceptr a = 0;
  errno = kErrno + 1;
  E2E_CHECK_CU(cuMemAlloc(&a, 1 * e2e::kMiB));
  E2E_CHECK(errno == kErrno + 1);

  // A failing allocation: exactly out-of-memory, errno and the output untouched.
  CUdeviceptr huge = 0x1234;
  errno = kErrno + 2;
  E2E_CHECK_RESULT(cuMemAlloc(&huge, kTooMuch), CUDA_ERROR_OUT_OF_MEMORY);
  E2E_CHECK(errno == kErrno + 2);
  E2E_CHECK(huge == 0x1234);

  // A failing free: exactly invalid-value.
  errno = kErrno + 3;
  E2E_CHECK_RESULT(cuMemFree(kNotAllocated), CUDA_ERROR_INVALID_VALUE);
  E2E_CHECK(errno == kErrno + 3);

  // Reuse: the driver's pointer reaches the program unchanged.
  E2E_CHECK_CU(cuMemFree(a));
  CUdeviceptr again = 0;
  E2E_CHECK_CU(cuMemAlloc(&again, 1 * e2e::kMiB));
  E2E_CHECK(again == a);

  // Through the runtime.
  void* r = nullptr;
  errno = kErrno + 4;
  E2E_CHECK_RESULT(cudaMalloc(&r, 2 * e2e::kMiB), cudaSuccess);
  E2E_CHECK(errno == kErrno + 4);
  void* r_huge = nullptr;
  errno = kErrno + 5;
  E2E_CHECK_RESULT(cudaMalloc(&r_huge, kTooMuch), cudaErrorMemoryAllocation);
  E2E_CHECK(errno == kErrno + 5);
  E2E_CHECK(r_huge == nullptr);
  void* host = nullptr;
  errno = kErrno + 6;
  E2E_CHECK_RESULT(cudaHostAlloc(&host, 64 * e2e::kKiB, cudaHostAllocDefault), cudaSuccess);
  E2E_CHECK(errno == kErrno + 6);
  static_cast<char*>(host)[64 * e2e::kKiB - 1] = 7;
  errno = kErrno + 7;
  E2E_CHECK_RESULT(cudaFreeHost(host), cudaSuccess);
  E2E_CHECK_RESULT(cudaFree(r), cudaSuccess);
  E2E_CHECK(errno == kErrno + 7);

  // The planted failure (when the fake is told to plant one).
  CUdeviceptr big = 0;
  const CUresult big_result = cuMemAlloc(&big, e2e::kPlantedFailureBytes);
  if (big_result == CUDA_SUCCESS) {
    E2E_CHECK_CU(cuMemFree(big));
  } else {
    E2E_CHECK_RESULT(big_result, CUDA_ERROR_OUT_OF_MEMORY);
  }
  // Leaked on purpose: again.
  return 3;
}
