// Nanoseconds per stack walk, by walker, with warm and with evicted caches: the preload's own walker
// (preload/fast_unwind.cc) taking the outer frames from the thread's previous walk, the same walker made to walk
// every frame (two call paths alternate, so the previous walk never matches), and libunwind's unw_backtrace.
//
// Why: on the GPU machine unwinding cost ~40 ns per frame inside PyTorch whichever walker ran, against ~10 ns on
// the development VM; this separates the machine (cache misses on the stack and the tables) from the walker.
//
// Usage: walk_cost [DEPTH=35] [WALKS=20000]   Prints one JSON object per (walker, evicted KiB).
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <initializer_list>

#include "preload/fast_unwind.h"

namespace {

enum Walker { kOwnReusing, kOwnEveryFrame, kLibunwind };
const char* const kWalkerNames[] = {"own, previous walk reused", "own, every frame", "libunwind unw_backtrace"};

struct Setup {
  Walker walker;
  size_t evict_bytes;
  int walks;
  unsigned char* evict;
  double total_ns;
  int frames;
};

int64_t Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

volatile unsigned char g_sink;

__attribute__((noinline)) void WalkOnce(Setup* s) {
  void* out[256];
  if (s->evict_bytes > 0) memset(s->evict, static_cast<int>(g_sink + 1), s->evict_bytes);
  const int64_t t0 = Now();
  const int n = s->walker == kLibunwind ? unw_backtrace(out, 256) : cumemtrace::preload::FastBacktrace(out, 256);
  s->total_ns += static_cast<double>(Now() - t0);
  s->frames = n;
}

// A frame of ~300 bytes, like the large frames of PyTorch's C++, so that each frame's return address lies in
// its own cache line.
__attribute__((noinline)) void Descend(Setup* s, int depth) {
  volatile unsigned char pad[300];
  pad[0] = static_cast<unsigned char>(depth);
  if (depth == 0) {
    WalkOnce(s);
  } else {
    Descend(s, depth - 1);
  }
  g_sink = pad[0];
}

// Two entry points: alternating between them changes the outermost return address of every walk, so the own
// walker's previous walk never holds and it walks every frame.
__attribute__((noinline)) void EntryA(Setup* s, int depth) { Descend(s, depth); g_sink = 1; }
__attribute__((noinline)) void EntryB(Setup* s, int depth) { Descend(s, depth); g_sink = 2; }

}  // namespace

int main(int argc, char** argv) {
  const int depth = argc > 1 ? atoi(argv[1]) : 35;
  const int walks = argc > 2 ? atoi(argv[2]) : 20000;
  const size_t evicts[] = {0, size_t{1} << 20, size_t{16} << 20};
  unsigned char* evict = static_cast<unsigned char*>(malloc(evicts[2]));
  for (size_t e : evicts) {
    for (Walker w : {kOwnReusing, kOwnEveryFrame, kLibunwind}) {
      Setup s{w, e, walks, evict, 0, 0};
      for (int i = 0; i < walks / 10; ++i) EntryA(&s, depth);  // warm the tables
      s.total_ns = 0;
      for (int i = 0; i < walks; ++i) {
        if (w == kOwnEveryFrame && (i & 1) != 0) EntryB(&s, depth); else EntryA(&s, depth);
      }
      printf("{\"walker\": \"%s\", \"evict_kib\": %zu, \"frames\": %d, \"ns_per_walk\": %.1f, \"ns_per_frame\": %.2f}\n",
             kWalkerNames[w], e >> 10, s.frames, s.total_ns / walks, s.total_ns / walks / s.frames);
    }
  }
  free(evict);
  return 0;
}
