// The preload's stack walker against libunwind's unw_backtrace, the walker it replaces on the hot path: the same
// return addresses, frame for frame, on stacks of this test's own functions, of libc (qsort) and of libstdc++
// (std::sort), deep and shallow, with frames that use a frame pointer (alloca) and frames that do not, on the main
// thread and on another one; walks that take their outer frames from the thread's previous walk (the same path
// again, a deeper or shallower one, a different caller at the same stack depth, a longer walk after a shorter one).
// Where the walker declines a stack (a signal handler's frame), libunwind must walk it.
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "preload/fast_unwind.h"

namespace cumemtrace::preload {
namespace {

struct Walks {
  std::vector<void*> fast;
  int fast_count = 0;
  std::vector<void*> libunwind;
  int libunwind_count = 0;
  int reused = 0;  // frames the walker took from the thread's previous walk
};

// Both walks from one frame; entry 0 of each is its own call site here, so comparisons start at entry 1.
__attribute__((noinline)) Walks WalkBoth(int max) {
  Walks w;
  w.fast.resize(static_cast<size_t>(max));
  w.libunwind.resize(static_cast<size_t>(max));
  w.fast_count = FastBacktrace(w.fast.data(), max, &w.reused);
  w.libunwind_count = unw_backtrace(w.libunwind.data(), max);
  return w;
}

void ExpectSameWalk(const Walks& w) {
  ASSERT_GE(w.fast_count, 2) << "the walker declined a plain stack";
  ASSERT_EQ(w.fast_count, w.libunwind_count);
  for (int i = 1; i < w.fast_count; ++i) EXPECT_EQ(w.fast[i], w.libunwind[i]) << "frame " << i;
}

volatile int g_sink = 0;  // keeps the recursion from being folded into a loop

__attribute__((noinline)) Walks Recurse(int depth, int max) {
  if (depth == 0) return WalkBoth(max);
  Walks w = Recurse(depth - 1, max);
  g_sink = g_sink + depth;
  return w;
}

// A frame whose CFA is RBP-based: alloca makes the compiler keep a frame pointer.
__attribute__((noinline)) Walks WithAlloca(int bytes, int max) {
  char* buffer = static_cast<char*>(alloca(static_cast<size_t>(bytes)));
  for (int i = 0; i < bytes; ++i) buffer[i] = static_cast<char>(i);
  g_sink = g_sink + buffer[0];
  Walks w = Recurse(3, max);
  g_sink = g_sink + buffer[bytes / 2];
  return w;
}

TEST(FastUnwindTest, SameAsLibunwindOnPlainStacks) {
  for (int depth : {0, 1, 5, 40}) {
    for (int max : {1, 2, 8, 64, 256}) {
      Walks w = Recurse(depth, max);
      if (max == 1) {
        EXPECT_EQ(w.fast_count, 1);
        continue;
      }
      ExpectSameWalk(w);
    }
  }
}

TEST(FastUnwindTest, TheSamePathAgainReusesThePreviousWalk) {
  Walks walks[2];
  for (Walks& w : walks) w = Recurse(6, 64);  // one call site: the same path down to the walker
  ExpectSameWalk(walks[0]);
  ExpectSameWalk(walks[1]);
  EXPECT_GT(walks[1].reused, 6) << "the outer frames of the same path should come from the previous walk";
}

TEST(FastUnwindTest, LongerWalkAfterAShorterOneGoesOnPastIt) {
  Walks shorter = Recurse(10, 6);
  ASSERT_EQ(shorter.fast_count, 6);
  Walks longer = Recurse(10, 64);
  ExpectSameWalk(longer);
}

TEST(FastUnwindTest, ShallowerAndDeeperPathsAfterEachOther) {
  for (int depth : {12, 3, 20, 0, 7, 7, 30}) ExpectSameWalk(Recurse(depth, 128));
}

// Two callers with the same frame layout, called from the same place: their stacks have the same depth and the
// same inner frames, but different return addresses outside. The second walk must not take the first one's.
__attribute__((noinline)) Walks CallerA(int max) {
  Walks w = Recurse(2, max);
  g_sink = g_sink + 1;
  return w;
}
__attribute__((noinline)) Walks CallerB(int max) {
  Walks w = Recurse(2, max);
  g_sink = g_sink + 2;
  return w;
}

TEST(FastUnwindTest, ADifferentCallerAtTheSameDepthIsNotTakenForThePreviousOne) {
  Walks a = CallerA(64);
  Walks b = CallerB(64);
  ExpectSameWalk(a);
  ExpectSameWalk(b);
  ASSERT_GE(a.fast_count, 6);
  EXPECT_NE(a.fast[4], b.fast[4]) << "the callers' return addresses differ";
}

TEST(FastUnwindTest, SameAsLibunwindThroughFramePointerFrames) {
  // Again and again from one call site, with the frame pointer frame's size changing and not: walks that take
  // their outer frames, RBP-based ones among them, from the previous walk, and walks that cannot.
  for (int bytes : {200, 200, 264, 264, 200, 1000}) {
    Walks w = WithAlloca(bytes, 128);
    ExpectSameWalk(w);
  }
}

Walks g_from_callback;
bool g_walked = false;

int CompareAndWalk(const void* a, const void* b) {
  if (!g_walked) {
    g_walked = true;
    g_from_callback = Recurse(2, 128);
  }
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}

TEST(FastUnwindTest, SameAsLibunwindThroughLibcAndLibstdcxx) {
  std::vector<int> values = {5, 3, 9, 1, 7, 2, 8};
  g_walked = false;
  qsort(values.data(), values.size(), sizeof(int), CompareAndWalk);
  ExpectSameWalk(g_from_callback);
  g_walked = false;
  std::vector<int> more = {5, 3, 9, 1, 7, 2, 8, 4, 6, 0, 11, 10, 12, 15, 14, 13, 16, 19, 18, 17};
  std::sort(more.begin(), more.end(), [](int a, int b) { return CompareAndWalk(&a, &b) < 0; });
  ExpectSameWalk(g_from_callback);
}

void* WalkOnThread(void* out) {
  *static_cast<Walks*>(out) = Recurse(4, 128);
  return nullptr;
}

TEST(FastUnwindTest, SameAsLibunwindOnAnotherThreadToItsStart) {
  Walks w;
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, nullptr, WalkOnThread, &w), 0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  ExpectSameWalk(w);
  EXPECT_LT(w.fast_count, 128) << "the walk must end at the thread's start, as libunwind's does";
}

Walks g_in_handler;

void Handler(int) { g_in_handler = Recurse(2, 128); }

TEST(FastUnwindTest, SignalFramesGoToLibunwind) {
  struct sigaction action {};
  struct sigaction old {};
  action.sa_handler = Handler;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &action, &old), 0);
  raise(SIGUSR1);
  sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(g_in_handler.fast_count, -1) << "a signal frame needs libunwind";
  EXPECT_GT(g_in_handler.libunwind_count, 4);
}

}  // namespace
}  // namespace cumemtrace::preload
