// End-to-end test program (q): the cases that broke the order and the ownership of a trace.
//   e2e_storm threads <T> <N>   T threads, each N x (cuMemAlloc, cuMemFree), all pinned to one CPU so that the
//                               scheduler preempts threads between a free's sequence number and its append (the
//                               order test); writes the number of successful allocations to count.txt.
//   e2e_storm fork-first <K>    forks K children before the first CUDA call; each child allocates and frees, then
//                               _exit; the parent waits for them, then allocates and frees (the parent's trace must
//                               hold all of its events; no child may write, or take, the parent's trace).
//   e2e_storm fork-storm <K>    4 threads churn while the main thread forks K children that allocate and _exit.
//   e2e_storm deep <levels>     allocates (and leaks) 1 MiB from <levels> recursive calls deep below main().
//   e2e_storm vla <N>           N rounds of two allocations from one call site through a recursion whose frames
//                               hold variable-length arrays, sized so that the innermost frame lies at the same stack
//                               address with one level more or less (the unwind memo must not take one for the
//                               other: the frames above lie elsewhere while the return addresses checked match).
//   e2e_storm latency <N> <us>  one thread, N x (cuMemAlloc, cuMemFree) with a <us> microsecond sleep after each
//                               pair; writes "<N> <first pair in ns> <slowest later pair in ns>" to latency.txt (the
//                               slow-disk test: how long the program waited while the trace was written; the first
//                               pair starts tracing, which writes the header).
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include <cuda.h>

#include "program_support.h"

namespace {

namespace e2e = cumemtrace::e2e;

void WriteCount(long count) {
  FILE* f = fopen("count.txt", "w");
  E2E_CHECK(f != nullptr);
  fprintf(f, "%ld\n", count);
  fclose(f);
}

void PinToOneCpu() {
  cpu_set_t allowed;
  E2E_CHECK(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    E2E_CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);  // threads created later inherit it
    return;
  }
}

int Threads(int threads, int iterations) {
  PinToOneCpu();
  E2E_CHECK_CU(cuInit(0));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([t, iterations] {
      const size_t size = static_cast<size_t>(t % 13 + 1) * 512;
      for (int k = 0; k < iterations; ++k) {
        CUdeviceptr p = 0;
        E2E_CHECK_CU(cuMemAlloc(&p, size));
        E2E_CHECK_CU(cuMemFree(p));
      }
    });
  }
  for (std::thread& w : workers) w.join();
  WriteCount(static_cast<long>(threads) * iterations);
  return 0;
}

int ForkFirst(int children) {
  std::vector<pid_t> pids;
  for (int i = 0; i < children; ++i) {
    const pid_t pid = fork();
    E2E_CHECK(pid >= 0);
    if (pid == 0) {
      // The child's first CUDA call is the first of the whole process tree.
      if (cuInit(0) != CUDA_SUCCESS) _exit(10);
      for (int k = 0; k < 20; ++k) {
        CUdeviceptr p = 0;
        if (cuMemAlloc(&p, (k + 1) * e2e::kKiB) != CUDA_SUCCESS) _exit(11);
        if (cuMemFree(p) != CUDA_SUCCESS) _exit(12);
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    E2E_CHECK(waitpid(pid, &status, 0) == pid);
    E2E_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  E2E_CHECK_CU(cuInit(0));
  constexpr int kParentPairs = 75;
  for (int k = 0; k < kParentPairs; ++k) {
    CUdeviceptr p = 0;
    E2E_CHECK_CU(cuMemAlloc(&p, (k + 1) * e2e::kKiB));
    E2E_CHECK_CU(cuMemFree(p));
  }
  WriteCount(kParentPairs);
  return 0;
}

// Threads churn while the main thread forks children that allocate and _exit: the parent's trace must stay exact
// and complete; children trace only with follow-fork, each into its own file.
int ForkStorm(int children) {
  E2E_CHECK_CU(cuInit(0));
  CUdeviceptr first = 0;
  E2E_CHECK_CU(cuMemAlloc(&first, 4 * e2e::kKiB));  // tracing has started before the first fork
  constexpr int kChurners = 4, kPairs = 2000;
  std::vector<std::thread> churners;
  for (int t = 0; t < kChurners; ++t) {
    churners.emplace_back([t] {
      for (int k = 0; k < kPairs; ++k) {
        CUdeviceptr p = 0;
        E2E_CHECK_CU(cuMemAlloc(&p, static_cast<size_t>(t + 1) * 512));
        E2E_CHECK_CU(cuMemFree(p));
      }
    });
  }
  std::vector<pid_t> pids;
  for (int i = 0; i < children; ++i) {
    const pid_t pid = fork();
    E2E_CHECK(pid >= 0);
    if (pid == 0) {
      for (int k = 0; k < 10; ++k) {
        CUdeviceptr p = 0;
        if (cuMemAlloc(&p, 8 * e2e::kKiB) != CUDA_SUCCESS) _exit(11);
        if (cuMemFree(p) != CUDA_SUCCESS) _exit(12);
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    E2E_CHECK(waitpid(pid, &status, 0) == pid);
    E2E_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  for (std::thread& t : churners) t.join();
  E2E_CHECK_CU(cuMemFree(first));
  WriteCount(kChurners * kPairs + 1);
  return 0;
}

// Recurses `levels` deep (never inlined, never a tail call), then allocates.
__attribute__((noinline)) int Recurse(int levels) {
  if (levels == 0) {
    CUdeviceptr p = 0;
    E2E_CHECK_CU(cuMemAlloc(&p, e2e::kMiB));
    return 0;
  }
  const int result = Recurse(levels - 1);
  asm volatile("" ::: "memory");
  return result + 1;
}

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int Latency(int pairs, int sleep_us) {
  E2E_CHECK_CU(cuInit(0));
  int64_t first_ns = 0, slowest_ns = 0;
  for (int k = 0; k < pairs; ++k) {
    const int64_t start_ns = MonotonicNs();
    CUdeviceptr p = 0;
    E2E_CHECK_CU(cuMemAlloc(&p, static_cast<size_t>(k % 7 + 1) * 512));
    E2E_CHECK_CU(cuMemFree(p));
    const int64_t pair_ns = MonotonicNs() - start_ns;
    if (k == 0) first_ns = pair_ns;
    if (k > 0 && pair_ns > slowest_ns) slowest_ns = pair_ns;
    if (sleep_us > 0) usleep(static_cast<useconds_t>(sleep_us));
  }
  FILE* f = fopen("latency.txt", "w");
  E2E_CHECK(f != nullptr);
  fprintf(f, "%d %lld %lld\n", pairs, static_cast<long long>(first_ns), static_cast<long long>(slowest_ns));
  fclose(f);
  return 0;
}

// One level of the recursion of `vla`: a frame of sizes[level] bytes more (a frame pointer's frame, as the compiler
// gives every function with a variable-length array). At the bottom it allocates, or notes where its frame lies.
__attribute__((noinline)) void VariableFrames(int level, const int* sizes, bool allocate, uintptr_t* marker) {
  volatile char pad[sizes[level]];
  pad[0] = 0;
  asm volatile("" : : "r"(&pad[0]) : "memory");
  if (level > 0) {
    VariableFrames(level - 1, sizes, allocate, marker);
  } else if (allocate) {
    CUdeviceptr p = 0;
    E2E_CHECK_CU(cuMemAlloc(&p, 4096));
    E2E_CHECK_CU(cuMemFree(p));
  } else {
    volatile char here = 0;
    *marker = reinterpret_cast<uintptr_t>(&here);
  }
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void Descend(int levels, const int* sizes, bool allocate, uintptr_t* marker) {
  VariableFrames(levels - 1, sizes, allocate, marker);
  asm volatile("" ::: "memory");
}

int Vla(int rounds) {
  E2E_CHECK_CU(cuInit(0));
  static const int kThree[3] = {16, 16, 16};
  uintptr_t want = 0, got = 0;
  Descend(3, kThree, false, &want);
  // Two levels, the outer one's array sized so that the innermost frame lies where it does with three.
  static int two[2] = {16, 16};
  for (two[1] = 16; two[1] < 8192; two[1] += 8) {
    Descend(2, two, false, &got);
    if (got == want) break;
  }
  if (got != want) {
    fprintf(stderr, "e2e_storm vla: no array size puts the frames at the same place\n");
    return 1;
  }
  static volatile int levels[2] = {2, 3};
  static const int* volatile sizes[2] = {two, kThree};
  for (int i = 0; i < 2 * rounds; ++i) Descend(levels[i % 2], sizes[i % 2], true, nullptr);  // one call site
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "threads") == 0) return Threads(atoi(argv[2]), atoi(argv[3]));
  if (argc == 3 && strcmp(argv[1], "fork-first") == 0) return ForkFirst(atoi(argv[2]));
  if (argc == 3 && strcmp(argv[1], "fork-storm") == 0) return ForkStorm(atoi(argv[2]));
  if (argc == 4 && strcmp(argv[1], "latency") == 0) return Latency(atoi(argv[2]), atoi(argv[3]));
  if (argc == 3 && strcmp(argv[1], "vla") == 0) return Vla(atoi(argv[2]));
  if (argc == 3 && strcmp(argv[1], "deep") == 0) {
    E2E_CHECK_CU(cuInit(0));
    return Recurse(atoi(argv[2])) == atoi(argv[2]) ? 0 : 1;
  }
  fprintf(stderr, "usage: e2e_storm threads <threads> <iterations> | fork-first <children> | fork-storm <children> | "
                  "deep <levels> | vla <rounds> | latency <pairs> <sleep-us>\n");
  return 2;
}
