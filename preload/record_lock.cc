// RecordLock and WakeSignal (see record_lock.h).
#include "preload/record_lock.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "preload/clock.h"

namespace cumemtrace::preload {
namespace {

void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Sleeps while *word == expected, at most `ns` (a relative timeout), or until woken. Any error (the word changed,
// a signal, the timeout) just returns: every caller looks again. errno is the program's: syscall() sets it on those
// errors (a pthread mutex never touched it), so it is kept.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t ns) {
  const int saved_errno = errno;
  timespec timeout{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, &timeout, nullptr, 0);
  errno = saved_errno;
}

void FutexWake(std::atomic<uint32_t>* word, int count) {
  const int saved_errno = errno;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
  errno = saved_errno;
}

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex word is 32 bits");

}  // namespace

void RecordLock::LockContended() {
  // The holder is appending an event, but with several threads waiting each holds it in turn, and every hand-over
  // moves the event's lines between cores: spin, reading only (so the holder keeps its cache line), for up to
  // kSpinNs, the clock read every 16 pauses. A sleep costs the waiter a futex wait and, while any thread sleeps, every
  // release a futex wake on the program's thread (microseconds each). What contention still costs is most likely the
  // lines an event writes moving between cores (docs/performance.md, "Several threads at once").
  int64_t deadline = 0;
  for (int spin = 1;; ++spin) {
    CpuRelax();
    if (state_.load(std::memory_order_relaxed) == 0 && state_.exchange(1, std::memory_order_acquire) == 0) return;
    if (spin % 16 != 0) continue;
    const int64_t now = MonotonicNs();
    if (deadline == 0) {
      deadline = now + kSpinNs;
    } else if (now > deadline) {
      break;
    }
  }
  // Registered before the exchange that fails: a holder that releases after it sees the sleeper (but for the
  // window record_lock.h describes).
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  while (state_.exchange(1, std::memory_order_acquire) != 0) FutexWait(&state_, 1, kSleepNs);
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

void RecordLock::WakeOne() { FutexWake(&state_, 1); }

void WakeSignal::Signal() {
  count_.fetch_add(1, std::memory_order_release);
  FutexWake(&count_, 1);
}

bool WakeSignal::WaitUntil(uint32_t seen, int64_t deadline_ns) {
  const int64_t left = deadline_ns - MonotonicNs();
  if (left <= 0) return false;
  if (count_.load(std::memory_order_acquire) != seen) return true;
  FutexWait(&count_, seen, left);
  return MonotonicNs() < deadline_ns || count_.load(std::memory_order_acquire) != seen;
}

}  // namespace cumemtrace::preload
