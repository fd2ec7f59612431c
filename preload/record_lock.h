// The recorder's lock (recorder_locks.h: `record`), which every event takes once, and the flush thread's wake-up.
//
// Why not a pthread mutex: its release is a locked instruction, which waits until the event's stores have left the
// core, and every event pays it; here the release is a plain store (a release store: no fence on x86-64). Waiters
// spin up to kSpinNs (alone, the lock is held for a few hundred nanoseconds, an event's append; with threads on
// several cores, a microsecond or more per holder) and then sleep on a futex. The
// holder wakes a sleeper only if it sees one registered. Without a fence between the release and that look (the
// fence is what the plain store saves), a waiter that registers in the few nanoseconds while the release is still
// in its core's store buffer could be missed; its futex wait is bounded (kSleepNs), so it then waits that long at
// worst, never for ever. Only contended acquisitions can pay it.
//
// Never allocates; blocks only on the lock itself. Not recursive.
#ifndef CUMEMTRACE_PRELOAD_RECORD_LOCK_H_
#define CUMEMTRACE_PRELOAD_RECORD_LOCK_H_

#include <stdint.h>

#include <atomic>

namespace cumemtrace::preload {

class RecordLock {
 public:
  void Lock() {
    if (state_.exchange(1, std::memory_order_acquire) != 0) LockContended();
  }
  void Unlock() {
    state_.store(0, std::memory_order_release);
    if (sleepers_.load(std::memory_order_relaxed) != 0) WakeOne();
  }
  // In a forked child, whose lock the fork handlers hold: the parent's sleepers do not exist there.
  void ForgetSleepers() { sleepers_.store(0, std::memory_order_relaxed); }

 private:
  static constexpr int64_t kSpinNs = 20 * 1000;
  static constexpr int64_t kSleepNs = 1000 * 1000;
  void LockContended();
  void WakeOne();

  std::atomic<uint32_t> state_{0};     // 1: held
  std::atomic<uint32_t> sleepers_{0};  // threads in (or about to enter) a futex wait on state_
};

// Wakes the flush thread, or lets it sleep until something happens or a deadline passes, without a condition
// variable (which would need a pthread mutex as its lock).
class WakeSignal {
 public:
  // Wakes a thread in WaitUntil, or makes the next WaitUntil begun before this call return at once.
  void Signal();
  // The signal's count now: pass it to WaitUntil after releasing the lock under which the condition was checked.
  uint32_t Count() const { return count_.load(std::memory_order_acquire); }
  // Sleeps until Signal() is called after Count() returned `seen`, or CLOCK_MONOTONIC reaches `deadline_ns`.
  // Returns false when the deadline passed.
  bool WaitUntil(uint32_t seen, int64_t deadline_ns);
  void Reset() { count_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> count_{0};
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_RECORD_LOCK_H_
