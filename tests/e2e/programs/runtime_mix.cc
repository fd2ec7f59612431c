// The fixed mix of runtime memory calls (see runtime_mix.h).
#include "runtime_mix.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "program_support.h"

namespace cumemtrace::e2e {

void RunRuntimeMix() {
  E2E_CHECK_RESULT(cudaFree(nullptr), cudaSuccess);  // the usual "initialize CUDA" idiom
  void* zero = &zero;
  E2E_CHECK_RESULT(cudaMalloc(&zero, 0), cudaSuccess);
  E2E_CHECK(zero == nullptr);
  int devices = 0;
  E2E_CHECK_RESULT(cudaGetDeviceCount(&devices), cudaSuccess);
  E2E_CHECK(devices >= 2);

  void *a = nullptr, *b = nullptr, *c = nullptr;
  E2E_CHECK_RESULT(cudaMalloc(&a, 1 * kMiB), cudaSuccess);
  E2E_CHECK_RESULT(cudaMalloc(&b, 3 * kMiB), cudaSuccess);
  E2E_CHECK_RESULT(cudaFree(a), cudaSuccess);
  E2E_CHECK_RESULT(cudaMalloc(&c, 1 * kMiB), cudaSuccess);
  E2E_CHECK(c == a);

  void* pitched = nullptr;
  size_t pitch = 0;
  E2E_CHECK_RESULT(cudaMallocPitch(&pitched, &pitch, 1000, 64), cudaSuccess);
  void* managed = nullptr;
  E2E_CHECK_RESULT(cudaMallocManaged(&managed, 2 * kMiB, cudaMemAttachGlobal), cudaSuccess);

  void *pinned_small = nullptr, *pinned_big = nullptr;
  E2E_CHECK_RESULT(cudaMallocHost(&pinned_small, 64 * kKiB), cudaSuccess);
  E2E_CHECK_RESULT(cudaHostAlloc(&pinned_big, 1 * kMiB, cudaHostAllocPortable), cudaSuccess);
  memset(pinned_small, 1, 64 * kKiB);
  memset(pinned_big, 2, 1 * kMiB);
  std::vector<char> staging(256 * kKiB);
  E2E_CHECK_RESULT(cudaHostRegister(staging.data(), staging.size(), cudaHostRegisterDefault), cudaSuccess);
  E2E_CHECK_RESULT(cudaHostUnregister(staging.data()), cudaSuccess);

  cudaStream_t stream = nullptr;
  E2E_CHECK_RESULT(cudaStreamCreate(&stream), cudaSuccess);
  void* async = nullptr;
  E2E_CHECK_RESULT(cudaMallocAsync(&async, 2 * kMiB, stream), cudaSuccess);
  E2E_CHECK_RESULT(cudaFreeAsync(async, stream), cudaSuccess);

  // Another device: its events must carry device 1.
  E2E_CHECK_RESULT(cudaSetDevice(1), cudaSuccess);
  void* on_device_one = nullptr;
  E2E_CHECK_RESULT(cudaMalloc(&on_device_one, 4 * kMiB), cudaSuccess);
  int current = -1;
  E2E_CHECK_RESULT(cudaGetDevice(&current), cudaSuccess);
  E2E_CHECK(current == 1);
  E2E_CHECK_RESULT(cudaSetDevice(0), cudaSuccess);

  // The planted failure.
  void* big = nullptr;
  const cudaError_t big_result = cudaMalloc(&big, kPlantedFailureBytes);
  if (big_result == cudaSuccess) {
    E2E_CHECK_RESULT(cudaFree(big), cudaSuccess);
  } else {
    E2E_CHECK_RESULT(big_result, cudaErrorMemoryAllocation);
    E2E_CHECK(cudaGetErrorString(big_result) != nullptr);
  }

  E2E_CHECK_RESULT(cudaFree(c), cudaSuccess);
  E2E_CHECK_RESULT(cudaFree(pitched), cudaSuccess);
  E2E_CHECK_RESULT(cudaFreeHost(pinned_small), cudaSuccess);
  E2E_CHECK_RESULT(cudaStreamDestroy(stream), cudaSuccess);
  // Leaked on purpose: b, managed, pinned_big, on_device_one.
}

}  // namespace cumemtrace::e2e
