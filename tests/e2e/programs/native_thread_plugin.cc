// A library that a Python test program loads with ctypes: it allocates from a thread that it creates itself, so that
// thread never runs Python (like PyTorch's autograd engine threads). Links the fake libcuda directly.
#include <cuda.h>
#include <pthread.h>

#include <cstddef>

namespace {

struct Request {
  size_t size;
  CUdeviceptr pointer;
  CUresult result;
};

void* AllocateOnThisThread(void* arg) {
  auto* request = static_cast<Request*>(arg);
  request->result = cuMemAlloc_v2(&request->pointer, request->size);
  return nullptr;
}

}  // namespace

// Allocates `size` bytes on a new native thread and returns the address (0 on failure).
extern "C" __attribute__((visibility("default"))) unsigned long long AllocateOnNativeThread(size_t size) {
  Request request{size, 0, CUDA_ERROR_UNKNOWN};
  pthread_t thread;
  if (pthread_create(&thread, nullptr, AllocateOnThisThread, &request) != 0) return 0;
  pthread_join(thread, nullptr);
  return request.result == CUDA_SUCCESS ? request.pointer : 0;
}
