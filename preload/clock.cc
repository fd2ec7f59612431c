// The counter as the clock (clock.h says why and how it stays on CLOCK_MONOTONIC).
#include "preload/clock.h"

#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace cumemtrace::preload {

namespace clock_internal {
constinit std::atomic<bool> g_use_ticks{false};
constinit std::atomic<uint32_t> g_sequence{0};
constinit std::atomic<uint64_t> g_ticks_base{0};
constinit std::atomic<int64_t> g_ns{0};
constinit std::atomic<uint64_t> g_ns_per_tick_fixed{0};
}  // namespace clock_internal

namespace {

namespace ci = clock_internal;

// Only Start (before the flush thread exists) and the flush thread (holding the recorder's lock) touch these;
// g_allowed is also cleared by the flush thread outside that lock.
constinit std::atomic<bool> g_allowed{false};
constinit bool g_started = false;
constinit bool g_have_pair = false;
constinit ClockPair g_last_pair{};
constinit ClockHealth g_health{};

#if defined(__x86_64__)
// The tightest of a few (clock_gettime, rdtsc, clock_gettime) reads: the counter read lies between the two
// clock reads, so their midpoint is off by at most half their distance. Returns false where none was within
// kMaxPairWidthNs (the thread was preempted every time): no pair then, and no calibration until the next wake.
constexpr int64_t kMaxPairWidthNs = 1000;
bool ReadClockPair(ClockPair* pair) {
  int64_t best_width = INT64_MAX;
  for (int attempt = 0; attempt < 5 && best_width > 200; ++attempt) {
    const int64_t before = MonotonicNs();
    const uint64_t ticks = __rdtsc();
    const int64_t after = MonotonicNs();
    if (after - before < best_width) {
      best_width = after - before;
      *pair = ClockPair{ticks, before + best_width / 2};
    }
  }
  return best_width <= kMaxPairWidthNs;
}
#endif

void PublishScale(const ClockScale& scale) {
  const uint32_t sequence = ci::g_sequence.load(std::memory_order_relaxed);
  ci::g_sequence.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  ci::g_ticks_base.store(scale.ticks_base, std::memory_order_relaxed);
  ci::g_ns.store(scale.ns, std::memory_order_relaxed);
  ci::g_ns_per_tick_fixed.store(scale.ns_per_tick_fixed, std::memory_order_relaxed);
  ci::g_sequence.store(sequence + 2, std::memory_order_release);
}

void TurnTicksOff() {
  g_allowed.store(false, std::memory_order_relaxed);
  ci::g_use_ticks.store(false, std::memory_order_relaxed);
}

}  // namespace

bool NextClockScale(const ClockScale* current, ClockPair previous, ClockPair now, ClockScale* next,
                    int64_t* error_ns) {
  if (now.ticks <= previous.ticks || now.ns <= previous.ns) return false;
  const uint64_t ticks = now.ticks - previous.ticks;
  const int64_t elapsed = now.ns - previous.ns;
  const int64_t error = current != nullptr ? ScaleTicks(*current, now.ticks) - now.ns : 0;
  // Slewed: from where the current scale is now, to where CLOCK_MONOTONIC will be one more interval on.
  int64_t start = now.ns + error;
  int64_t span = elapsed - error;
  if (current == nullptr || error > kMaxSlewNs || error < -kMaxSlewNs || span <= elapsed / 2) {
    start = now.ns;
    span = elapsed;
  }
  using Wide = unsigned __int128;
  const uint64_t rate = static_cast<uint64_t>((Wide{static_cast<uint64_t>(span)} << kClockScaleShift) / ticks);
  *next = ClockScale{now.ticks, start, rate};
  *error_ns = error;
  return true;
}

void StartClock(bool allowed) {
  if (g_started) return;  // a forked child that starts a trace of its own keeps its parent's scale
  g_started = true;
#if defined(__x86_64__)
  int tsc_mode = 0;
  const bool rdtsc_works = prctl(PR_GET_TSC, &tsc_mode, 0, 0, 0) != 0 || tsc_mode != PR_TSC_SIGSEGV;
  if (!allowed || !rdtsc_works || !ClocksourceIsTsc()) return;
  g_allowed.store(true, std::memory_order_relaxed);
  g_have_pair = ReadClockPair(&g_last_pair);
#else
  (void)allowed;
#endif
}

void CalibrateClockLocked() {
#if defined(__x86_64__)
  if (!g_allowed.load(std::memory_order_relaxed)) return;
  if (g_have_pair && MonotonicNs() - g_last_pair.ns < kMinCalibrationNs) return;
  ClockPair now;
  if (!ReadClockPair(&now)) return;
  if (!g_have_pair) {  // the first pair was not read at the start: this one starts the interval
    g_last_pair = now;
    g_have_pair = true;
    return;
  }
  const bool in_use = ci::g_use_ticks.load(std::memory_order_relaxed);
  const ClockScale current{ci::g_ticks_base.load(std::memory_order_relaxed), ci::g_ns.load(std::memory_order_relaxed),
                           ci::g_ns_per_tick_fixed.load(std::memory_order_relaxed)};
  ClockScale next;
  int64_t error = 0;
  if (NextClockScale(in_use ? &current : nullptr, g_last_pair, now, &next, &error)) {
    PublishScale(next);
    ++g_health.calibrations;
    const uint64_t size = static_cast<uint64_t>(error < 0 ? -error : error);
    if (size > g_health.max_error_ns) g_health.max_error_ns = size;
    if (size > static_cast<uint64_t>(kMaxSlewNs)) ++g_health.steps;
    ci::g_use_ticks.store(true, std::memory_order_release);  // a reader that sees it sees the scale
  }
  g_last_pair = now;
#endif
}

void RecheckClocksource() {
  if (g_allowed.load(std::memory_order_relaxed) && !ClocksourceIsTsc()) TurnTicksOff();
}

bool ClocksourceIsTsc() {
  const int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[16] = {};
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  return n >= 3 && strncmp(text, "tsc", 3) == 0 && (n == 3 || text[3] == '\n');
}

ClockHealth ClockHealthNow() { return g_health; }

void ResetClockHealth() { g_health = ClockHealth{}; }

}  // namespace cumemtrace::preload
