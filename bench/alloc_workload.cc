// A synthetic allocation workload for measuring what a memory tracer costs per event.
//
// Why this exists: cumemtrace's design target (docs/performance.md) is a hook cost per event under half of heaptrack's
// on the same program at stack depth 32. The two tools hook different functions (cumemtrace the CUDA driver,
// heaptrack malloc), so this one program runs the same loop in two modes:
//   cuda    cuMemAlloc_v2 / cuMemFree_v2, linked directly against (here: the fake) libcuda.so.1
//   malloc  malloc / free
// Every allocation and free is made at a controlled stack depth (recursion of non-inlined functions), from one of
// 16 call sites, with sizes that vary and a bounded live set of kLiveSlots allocations, so frees interleave with
// allocations as in a real program and the same call paths repeat. The program times its own steady-state loop
// with clock_gettime, wall and thread CPU time (a tracer's start-up and shutdown are outside it), and prints one
// JSON object to stdout.
//
// Usage: alloc_workload cuda|malloc <pairs> <depth> [<warmup_ms>]
//   pairs      alloc/free pairs in the timed loop (each pair is two events)
//   depth      native frames on the stack at each allocation call, counted from the call site to _start
//   warmup_ms  keep churning, untimed, at least this long before the timed loop (default 0). heaptrack needs it:
//              its separate interpreter process starts slowly and the program blocks on the pipe meanwhile.
#include <cuda.h>
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <array>
#include <utility>

namespace {

constexpr int kSites = 16;
constexpr int kLiveSlots = 1024;
// Bytes per site before the per-call factor (1..8): 64 B to 128 KiB. Only the largest reaches glibc's initial mmap
// threshold, which glibc raises past it at the first free of such a block, so malloc mode stays in the heap.
constexpr uint64_t kSiteBytes[kSites] = {64,   96,   128,  256,  384,  512,  768,   1024,
                                         1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384};
// CUDA allocations are larger in real programs; the fake driver never backs them, so scale them up.
constexpr uint64_t kCudaScale = 512;

enum class Mode { kCuda, kMalloc };

struct Workload {
  Mode mode;
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  uintptr_t live[kLiveSlots] = {};
  uint64_t live_size[kLiveSlots] = {};
  uint64_t events = 0;  // allocations + frees made
  int probe_frames = 0;

  uint64_t Next() {  // xorshift64: cheap, deterministic, allocation-free
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  }
};

void Die(const char* what) {
  fprintf(stderr, "alloc_workload: %s\n", what);
  exit(1);
}

__attribute__((always_inline)) inline void FreeSlot(Workload& w, int slot) {
  if (w.live[slot] == 0) return;
  if (w.mode == Mode::kCuda) {
    if (cuMemFree_v2(static_cast<CUdeviceptr>(w.live[slot])) != CUDA_SUCCESS) Die("cuMemFree_v2 failed");
  } else {
    free(reinterpret_cast<void*>(w.live[slot]));
  }
  w.live[slot] = 0;
  ++w.events;
}

__attribute__((always_inline)) inline void AllocSlot(Workload& w, int slot, uint64_t size) {
  if (w.mode == Mode::kCuda) {
    CUdeviceptr p = 0;
    if (cuMemAlloc_v2(&p, size * kCudaScale) != CUDA_SUCCESS) Die("cuMemAlloc_v2 failed");
    w.live[slot] = static_cast<uintptr_t>(p);
  } else {
    void* p = malloc(size);
    if (p == nullptr) Die("malloc failed");
    static_cast<volatile char*>(p)[0] = 1;  // use it, so the compiler cannot drop the pair
    w.live[slot] = reinterpret_cast<uintptr_t>(p);
  }
  ++w.events;
}

// One call site: replaces the allocation in a slot (a free, then an allocation). Each instantiation is its own
// function with its own call instructions, so each site gives distinct stacks. `noipa` keeps GCC from inlining,
// cloning or merging the instantiations; FreeSlot and AllocSlot are always inlined, so the allocator is called from
// this frame, at exactly the depth the probe measures.
template <int kSite>
__attribute__((noipa)) void Site(Workload& w, int slot) {
  if (slot < 0) {  // depth probe: count the frames an allocation made here would see
    void* frames[256];
    w.probe_frames = backtrace(frames, 256);
    return;
  }
  FreeSlot(w, slot);
  AllocSlot(w, slot, kSiteBytes[kSite] * (1 + w.Next() % 8));
}

using SiteFn = void (*)(Workload&, int);

template <int... kIds>
constexpr auto MakeSites(std::integer_sequence<int, kIds...>) {
  return std::array<SiteFn, sizeof...(kIds)>{&Site<kIds>...};
}

// Recursion to reach the wanted depth. The statement after the call keeps it from becoming a tail call (which would
// reuse the frame and make the stack shallower).
__attribute__((noipa)) void Descend(Workload& w, int levels, SiteFn site, int slot) {
  if (levels > 0) {
    Descend(w, levels - 1, site, slot);
  } else {
    site(w, slot);
  }
  asm volatile("" ::: "memory");
}

int64_t NowNs(clockid_t clock = CLOCK_MONOTONIC) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) Die("usage: alloc_workload cuda|malloc <pairs> <depth> [<warmup_ms>]");
  Workload w{};
  if (strcmp(argv[1], "cuda") == 0) {
    w.mode = Mode::kCuda;
  } else if (strcmp(argv[1], "malloc") == 0) {
    w.mode = Mode::kMalloc;
  } else {
    Die("mode must be cuda or malloc");
  }
  const long long pairs = atoll(argv[2]);
  const int depth = atoi(argv[3]);
  const long long warmup_ms = argc == 5 ? atoll(argv[4]) : 0;
  if (pairs <= 0 || depth <= 0 || depth > 200) Die("pairs must be > 0 and depth in 1..200");
  if (w.mode == Mode::kCuda && cuInit(0) != CUDA_SUCCESS) Die("cuInit failed");

  static constexpr auto kSiteFns = MakeSites(std::make_integer_sequence<int, kSites>());

  // Calibrate: how many frames does the stack have at a site with no extra recursion?
  Descend(w, 0, kSiteFns[0], -1);
  const int levels = depth - w.probe_frames;
  if (levels < 0) Die("depth is below the minimum this program can reach");
  Descend(w, levels, kSiteFns[0], -1);
  const int frames = w.probe_frames;

  // Warm-up, untimed: fill the live set, then churn it (at least kLiveSlots steps, at least warmup_ms), so the
  // tracer's first-call set-up, its stack tables and its unwinder caches are done before the clock starts.
  for (int slot = 0; slot < kLiveSlots; ++slot) Descend(w, levels, kSiteFns[slot % kSites], slot);
  const int64_t warmup_end = NowNs() + warmup_ms * 1000000;
  for (int i = 0; i < kLiveSlots || NowNs() < warmup_end; ++i) {
    Descend(w, levels, kSiteFns[w.Next() % kSites], static_cast<int>(w.Next() % kLiveSlots));
  }
  const uint64_t warmup_events = w.events;

  // The timed loop: every step frees one live allocation and makes a new one (the live set is full).
  // Wall time, and this thread's CPU time, which other processes on a busy machine disturb less (it leaves out
  // time spent waiting, e.g. for heaptrack's interpreter to drain the pipe).
  const int64_t start = NowNs();
  const int64_t cpu_start = NowNs(CLOCK_THREAD_CPUTIME_ID);
  for (long long i = 0; i < pairs; ++i) {
    Descend(w, levels, kSiteFns[w.Next() % kSites], static_cast<int>(w.Next() % kLiveSlots));
  }
  const int64_t cpu_ns = NowNs(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
  const int64_t loop_ns = NowNs() - start;
  const uint64_t timed_events = w.events - warmup_events;

  for (int slot = 0; slot < kLiveSlots; ++slot) FreeSlot(w, slot);  // untimed, so nothing is left live

  printf("{\"mode\": \"%s\", \"pairs\": %lld, \"depth\": %d, \"frames\": %d, \"warmup_events\": %llu, "
         "\"timed_events\": %llu, \"total_events\": %llu, \"loop_ns\": %lld, \"ns_per_event\": %.2f, "
         "\"cpu_ns_per_event\": %.2f}\n",
         argv[1], pairs, depth, frames, static_cast<unsigned long long>(warmup_events),
         static_cast<unsigned long long>(timed_events), static_cast<unsigned long long>(w.events),
         static_cast<long long>(loop_ns),
         static_cast<double>(loop_ns) / static_cast<double>(timed_events),
         static_cast<double>(cpu_ns) / static_cast<double>(timed_events));
  return 0;
}
