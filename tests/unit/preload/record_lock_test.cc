// RecordLock: mutual exclusion with more threads than CPUs (so waiters reach the futex sleep), and a sleeping
// waiter gets the lock once it is released; WakeSignal: a signal before or during the wait wakes it,
// and the deadline ends it.
#include "preload/record_lock.h"

#include <errno.h>

#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "preload/clock.h"

namespace cumemtrace::preload {
namespace {

TEST(RecordLock, ExcludesWithMoreThreadsThanCpus) {
  RecordLock lock;
  constexpr int kThreads = 16;
  constexpr int kRounds = 20000;
  uint64_t counter = 0;  // plain: only the lock orders its updates
  int inside = 0;
  int overlaps = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        lock.Lock();
        if (++inside != 1) ++overlaps;
        ++counter;
        if (i % 512 == 0) std::this_thread::yield();  // a holder descheduled: waiters spin out and sleep
        --inside;
        lock.Unlock();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter, uint64_t{kThreads} * kRounds);
  EXPECT_EQ(overlaps, 0);
}

TEST(RecordLock, ASleepingWaiterGetsTheLockOnceReleased) {
  RecordLock lock;
  lock.Lock();
  int64_t acquired_ns = 0;
  std::thread waiter([&] {
    lock.Lock();  // spins out, then sleeps on the futex
    acquired_ns = MonotonicNs();
    lock.Unlock();
  });
  // Held for 50 ms: far past the spinning, so the waiter is asleep (its bounded waits end and start again).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int64_t released_ns = MonotonicNs();
  lock.Unlock();
  waiter.join();
  EXPECT_GE(acquired_ns, released_ns);  // never while the lock was held
}

// A traced program never sees its errno change: a waiter that slept on the futex (whose syscall sets errno on a
// timeout or a changed word) comes back with the errno it had.
TEST(RecordLock, AWaiterThatSleptKeepsItsErrno) {
  RecordLock lock;
  lock.Lock();
  int errno_after = 0;
  std::thread waiter([&] {
    errno = EDOM;
    lock.Lock();  // spins out, then sleeps (its 1 ms waits time out: ETIMEDOUT each)
    errno_after = errno;
    lock.Unlock();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  lock.Unlock();
  waiter.join();
  EXPECT_EQ(errno_after, EDOM);
}

TEST(WakeSignal, ASignalAfterTheCountWakesTheWait) {
  WakeSignal signal;
  const uint32_t seen = signal.Count();
  signal.Signal();  // before the wait begins: the wait must not sleep
  const int64_t start = MonotonicNs();
  EXPECT_TRUE(signal.WaitUntil(seen, start + 10LL * 1000 * 1000 * 1000));
  EXPECT_LT(MonotonicNs() - start, 5LL * 1000 * 1000 * 1000);
}

TEST(WakeSignal, ASignalDuringTheWaitWakesIt) {
  WakeSignal signal;
  const uint32_t seen = signal.Count();
  std::thread signaller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    signal.Signal();
  });
  const int64_t start = MonotonicNs();
  bool woken = false;
  while (!woken && signal.Count() == seen) woken = signal.WaitUntil(seen, start + 10LL * 1000 * 1000 * 1000);
  signaller.join();
  EXPECT_NE(signal.Count(), seen);
  EXPECT_LT(MonotonicNs() - start, 5LL * 1000 * 1000 * 1000);
}

TEST(WakeSignal, TheDeadlineEndsTheWait) {
  WakeSignal signal;
  const int64_t start = MonotonicNs();
  const int64_t deadline = start + 30 * 1000 * 1000;
  bool woken = true;
  while (woken) woken = signal.WaitUntil(signal.Count(), deadline);  // false only once the deadline passed
  EXPECT_GE(MonotonicNs(), deadline);
  EXPECT_FALSE(signal.WaitUntil(signal.Count(), start));  // a deadline already past returns at once
}

}  // namespace
}  // namespace cumemtrace::preload
