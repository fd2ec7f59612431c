// leaky.cu: a CUDA program with planted leaks and a planted failed allocation, built with nvcc's defaults (so the
// CUDA runtime is linked statically and reaches the driver through cuGetProcAddress, not through exported symbols).
// the GPU suite (tests/gpu/conftest.py) runs it plainly, under `compute-sanitizer --leak-check full` (the oracle) and under
// libcumemtrace.so; tests/gpu/tracekit.py checks that cumemtrace's leak and OOM reports name exactly what was planted.
//
// What is planted (the numbers compare.py expects; keep them in step with kPlanted there):
//   leak_model_weights(): cudaMalloc 3 MiB and 5 MiB from two call sites, never freed
//   leak_scratch():       cudaMalloc 7 MiB, never freed
//   planted_oom():        cudaMalloc(2^50) must fail with cudaErrorMemoryAllocation (CUDA_ERROR_OUT_OF_MEMORY at the
//                         driver); the error is checked and cleared with cudaGetLastError
//   properly_freed():     device, pinned host, managed and stream-ordered allocations, each freed: not leaks
// The program prints one `PLANTED <function> <bytes> <0xaddress>` line per planted leak, so the addresses that the
// sanitizer and the trace report can be matched exactly within the same run.
//
// Why cudaDeviceReset() at the end: compute-sanitizer's memcheck reports a leak for an allocation that is still
// live when its context is destroyed, and its manual asks runtime-API programs to call cudaDeviceReset() (driver-API
// programs: cuCtxDestroy) so that the leak summary is complete; without it, whether the context is torn down in a
// way the sanitizer sees depends on process-exit ordering. The reset does NOT make the leaks look freed to
// cumemtrace: it resets the primary context inside the driver, which releases the memory without any cuMemFree
// call, so no free event is ever recorded and the trace still shows the three allocations live at the end (which
// is what a leak is). `leaky --no-reset` skips the reset; gpu-check.sh traces both ways to show the report is the
// same either way.
//
// Exit status: 0 when everything behaved as planted, 1 on an unexpected CUDA error, 2 if the planted OOM did not
// fail the expected way. The leaks are deliberately not freed.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    cudaError_t check_err_ = (call);                                                                  \
    if (check_err_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "leaky: %s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,           \
                   cudaGetErrorString(check_err_), static_cast<int>(check_err_));                     \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Kept in a global so that nothing looks dead to the compiler; a pointer that is still referenced is a leak all the
// same for memcheck (it does no reachability analysis) and for cumemtrace (live at the end = leaked).
void* g_leaked[3] = {nullptr, nullptr, nullptr};

void Planted(const char* function, void* ptr, size_t bytes) {
  std::printf("PLANTED %s %zu %#llx\n", function, bytes,
              static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(ptr)));
}

__global__ void Fill(float* p, size_t n, float value) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    p[i] = value;
  }
}

}  // namespace

// Not static and not inlined, so that each has its own frame and symbol in the stacks (mangled as
// _Z18leak_model_weightsPPv and _Z12leak_scratchPPv; compare.py looks for the plain names as substrings).
__attribute__((noinline)) void leak_model_weights(void** out) {
  CHECK(cudaMalloc(&out[0], 3 * kMiB));
  Planted("leak_model_weights", out[0], 3 * kMiB);
  Fill<<<64, 256>>>(static_cast<float*>(out[0]), 3 * kMiB / sizeof(float), 1.0f);
  CHECK(cudaMalloc(&out[1], 5 * kMiB));
  Planted("leak_model_weights", out[1], 5 * kMiB);
  Fill<<<64, 256>>>(static_cast<float*>(out[1]), 5 * kMiB / sizeof(float), 2.0f);
  CHECK(cudaGetLastError());
}

__attribute__((noinline)) void leak_scratch(void** out) {
  CHECK(cudaMalloc(out, 7 * kMiB));
  Planted("leak_scratch", *out, 7 * kMiB);
  CHECK(cudaMemset(*out, 0, 7 * kMiB));
}

__attribute__((noinline)) void properly_freed() {
  // Device memory.
  void* dev = nullptr;
  CHECK(cudaMalloc(&dev, 4 * kMiB));
  Fill<<<64, 256>>>(static_cast<float*>(dev), 4 * kMiB / sizeof(float), 3.0f);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(dev));

  // Pinned host memory.
  void* pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, 2 * kMiB));
  std::memset(pinned, 0, 2 * kMiB);
  CHECK(cudaFreeHost(pinned));

  // Managed memory, small, touched by the device and read back on the host.
  float* managed = nullptr;
  CHECK(cudaMallocManaged(&managed, 64 * 1024));
  Fill<<<16, 256>>>(managed, 64 * 1024 / sizeof(float), 4.0f);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  if (managed[5] != 4.0f) {
    std::fprintf(stderr, "leaky: managed memory reads %f, expected 4\n", managed[5]);
    std::exit(1);
  }
  CHECK(cudaFree(managed));

  // Stream-ordered allocation.
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* async_ptr = nullptr;
  CHECK(cudaMallocAsync(&async_ptr, 6 * kMiB, stream));
  Fill<<<64, 256, 0, stream>>>(static_cast<float*>(async_ptr), 6 * kMiB / sizeof(float), 5.0f);
  CHECK(cudaGetLastError());
  CHECK(cudaFreeAsync(async_ptr, stream));
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaStreamDestroy(stream));
}

// Returns false if the request did not fail the planted way.
__attribute__((noinline)) bool planted_oom() {
  const size_t request = size_t{1} << 50;  // 1 PiB: more than any GPU has
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, request);
  // Allocation errors are not sticky: cudaGetLastError returns the error once and resets it to cudaSuccess.
  cudaError_t last = cudaGetLastError();
  cudaError_t after = cudaGetLastError();
  std::printf("OOM_CHECK requested=%zu error=%d (%s) last=%d after_clear=%d\n", request, static_cast<int>(err),
              cudaGetErrorName(err), static_cast<int>(last), static_cast<int>(after));
  if (err != cudaErrorMemoryAllocation || p != nullptr || after != cudaSuccess) {
    std::fprintf(stderr, "leaky: cudaMalloc(2^50) returned %s, expected cudaErrorMemoryAllocation\n",
                 cudaGetErrorName(err));
    return false;
  }
  return true;
}

int main(int argc, char** argv) {
  const bool reset = !(argc > 1 && std::strcmp(argv[1], "--no-reset") == 0);
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));  // creates the primary context

  leak_model_weights(&g_leaked[0]);
  leak_scratch(&g_leaked[2]);
  properly_freed();
  if (!planted_oom()) return 2;
  CHECK(cudaDeviceSynchronize());

  std::printf("LEAKED_TOTAL %zu 3\n", 15 * kMiB);
  std::printf("RESET %s\n", reset ? "yes" : "no");
  std::fflush(stdout);
  // See the comment at the top: the reset is for compute-sanitizer's leak summary; the leaks stay unfreed.
  if (reset) CHECK(cudaDeviceReset());
  return 0;
}
