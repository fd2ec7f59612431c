// How the tracer's one lock holds up when several threads allocate at once.
//
// Why this exists: the recorder appends every event under one lock, and the hook benchmark (alloc_workload.cc) has
// one thread, through a fake driver that serializes its calls with a mutex of its own, so contention for that lock
// was never measured. Here each thread allocates PyTorch blocks on a device of its own through the fake
// libc10_cuda.so of tests/fakes (the allocator's locks are per device, as PyTorch's are), and every block is reused
// from the thread's first segment, so no driver call is made in the timed loop: the only lock the threads share is
// the tracer's. Each thread allocates and frees a 1000-byte block `pairs` times after `pairs / 10` untimed, all
// threads starting together; the program prints one JSON object with each thread's loop time per pair.
//
// Usage: torch_threads <threads> <pairs>   (the fake driver has FAKE_CUDA_DEVICE_COUNT devices, 2 unless set)
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <atomic>
#include <thread>
#include <vector>

extern "C" {
void fake_torch_init(int device_count);
void* fake_torch_malloc(size_t size, int device);
void fake_torch_free_on(void* ptr, int device);
}

namespace {

int64_t Now(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void Churn(int device, long pairs) {
  for (long i = 0; i < pairs; ++i) {
    void* block = fake_torch_malloc(1000, device);
    if (block == nullptr) {
      fprintf(stderr, "torch_threads: no block on device %d\n", device);
      exit(1);
    }
    fake_torch_free_on(block, device);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || atoi(argv[1]) < 1 || atol(argv[2]) < 1) {
    fprintf(stderr, "usage: %s <threads> <pairs>\n", argv[0]);
    return 2;
  }
  const int threads = atoi(argv[1]);
  const long pairs = atol(argv[2]);
  if (cuInit(0) != CUDA_SUCCESS) {
    fprintf(stderr, "torch_threads: cuInit failed\n");
    return 1;
  }
  fake_torch_init(threads);
  std::atomic<int> ready{0};
  std::vector<double> wall_ns(threads), cpu_ns(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      Churn(t, pairs / 10 + 1);  // the segment, the tracer's tables for this thread
      ready.fetch_add(1);
      while (ready.load() < threads) {
      }
      const int64_t wall = Now(CLOCK_MONOTONIC), cpu = Now(CLOCK_THREAD_CPUTIME_ID);
      Churn(t, pairs);
      wall_ns[t] = static_cast<double>(Now(CLOCK_MONOTONIC) - wall) / static_cast<double>(pairs);
      cpu_ns[t] = static_cast<double>(Now(CLOCK_THREAD_CPUTIME_ID) - cpu) / static_cast<double>(pairs);
    });
  }
  for (std::thread& w : workers) w.join();
  printf("{\"threads\": %d, \"pairs\": %ld, \"ns_per_pair\": [", threads, pairs);
  for (int t = 0; t < threads; ++t) printf("%s%.1f", t == 0 ? "" : ", ", wall_ns[t]);
  printf("], \"cpu_ns_per_pair\": [");
  for (int t = 0; t < threads; ++t) printf("%s%.1f", t == 0 ? "" : ", ", cpu_ns[t]);
  printf("]}\n");
  return 0;
}
