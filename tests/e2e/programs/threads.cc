// End-to-end test program (g): several threads allocating and freeing concurrently, each reaching the driver its
// own way (exported symbols, the shared runtime, pointers from cuGetProcAddress), so that an address freed on one
// thread is handed out again on another while they race; a deliberate hand-off (free on one thread, the same
// address reused by the runtime on another); and a thread named "pt_data_pin" pinning host memory with
// cuMemHostAlloc, as PyTorch's DataLoader pin-memory thread does. The trace must order every free before the reuse
// of its address (sequence numbers), attribute events to the right threads and keep the thread's name.
#include <pthread.h>

#include <atomic>
#include <barrier>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "program_support.h"

namespace {

namespace e2e = cumemtrace::e2e;

constexpr int kWorkers = 4;
constexpr int kIterations = 300;
constexpr size_t kHeld = 4;
constexpr size_t kHandOffBytes = 5 * e2e::kMiB;
constexpr int kPins = 24;

// How a worker reaches the driver.
enum class Path { kDirect, kRuntime, kGetProcAddress };
constexpr Path kWorkerPaths[kWorkers] = {Path::kDirect, Path::kDirect, Path::kRuntime, Path::kGetProcAddress};

e2e::DriverApi by_get_proc_address;

class Worker {
 public:
  explicit Worker(Path path) : path_(path) {
    if (path_ == Path::kGetProcAddress) E2E_CHECK_CU(by_get_proc_address.stream_create(&stream_, 0));
  }

  CUresult Allocate(size_t size, CUdeviceptr* p) const {
    switch (path_) {
      case Path::kDirect: return cuMemAlloc(p, size);
      case Path::kRuntime: {
        void* v = nullptr;
        const cudaError_t result = cudaMalloc(&v, size);
        *p = reinterpret_cast<CUdeviceptr>(v);
        return result == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
      }
      case Path::kGetProcAddress: return by_get_proc_address.mem_alloc_async(p, size, stream_);
    }
    return CUDA_ERROR_INVALID_VALUE;
  }

  void Free(CUdeviceptr p) const {
    switch (path_) {
      case Path::kDirect: E2E_CHECK_CU(cuMemFree(p)); return;
      case Path::kRuntime: E2E_CHECK_RESULT(cudaFree(reinterpret_cast<void*>(p)), cudaSuccess); return;
      case Path::kGetProcAddress: E2E_CHECK_CU(by_get_proc_address.mem_free_async(p, stream_)); return;
    }
  }

 private:
  Path path_;
  CUstream stream_ = nullptr;
};

std::barrier<> phase(kWorkers);
std::atomic<CUdeviceptr> handed_off{0};

void RunWorker(int index) {
  const Worker worker(kWorkerPaths[index]);
  if (index == 3) {  // the planted failure, on a worker thread
    CUdeviceptr big = 0;
    const CUresult result = worker.Allocate(e2e::kPlantedFailureBytes, &big);
    if (result == CUDA_SUCCESS) {
      worker.Free(big);
    } else {
      E2E_CHECK_RESULT(result, CUDA_ERROR_OUT_OF_MEMORY);
    }
  }
  phase.arrive_and_wait();

  // Phase 1: churn; sizes repeat across threads, so freed addresses are reused everywhere.
  std::deque<CUdeviceptr> held;
  for (int k = 0; k < kIterations; ++k) {
    const size_t size = static_cast<size_t>((index * 7 + k * 13) % 16 + 1) * 64 * e2e::kKiB;
    CUdeviceptr p = 0;
    E2E_CHECK_CU(worker.Allocate(size, &p));
    held.push_back(p);
    if (held.size() > kHeld) {
      worker.Free(held.front());
      held.pop_front();
    }
  }
  while (held.size() > 1) {  // one allocation per worker is leaked
    worker.Free(held.front());
    held.pop_front();
  }
  phase.arrive_and_wait();

  // Phase 2: worker 0 frees an address, worker 2 (through the runtime) gets the same address.
  if (index == 0) {
    CUdeviceptr p = 0;
    E2E_CHECK_CU(worker.Allocate(kHandOffBytes, &p));
    worker.Free(p);
    handed_off.store(p);
  }
  phase.arrive_and_wait();
  if (index == 2) {
    CUdeviceptr p = 0;
    E2E_CHECK_CU(worker.Allocate(kHandOffBytes, &p));
    E2E_CHECK(p == handed_off.load());
    worker.Free(p);
  }
}

void RunPinThread() {
  E2E_CHECK(pthread_setname_np(pthread_self(), "pt_data_pin") == 0);
  std::deque<void*> pinned;
  for (int k = 0; k < kPins; ++k) {
    void* p = nullptr;
    E2E_CHECK_CU(cuMemHostAlloc(&p, (k % 3 + 1) * e2e::kMiB, CU_MEMHOSTALLOC_PORTABLE));
    memset(p, k, e2e::kMiB);
    pinned.push_back(p);
    if (pinned.size() > 2) {
      E2E_CHECK_CU(cuMemFreeHost(pinned.front()));
      pinned.pop_front();
    }
  }
  // The last two pinned buffers are leaked.
}

}  // namespace

int main() {
  E2E_CHECK_CU(cuInit(0));
  void* driver = e2e::OpenDriver();
  auto get_proc_address = reinterpret_cast<e2e::GetProcAddressFn>(e2e::Symbol(driver, "cuGetProcAddress_v2"));
  e2e::FillByGetProcAddress(get_proc_address, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &by_get_proc_address);

  std::vector<std::thread> threads;
  threads.emplace_back(RunPinThread);
  for (int i = 0; i < kWorkers; ++i) threads.emplace_back(RunWorker, i);
  for (std::thread& t : threads) t.join();
  return 0;
}
