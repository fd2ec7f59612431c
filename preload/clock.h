// The preload's clock: CLOCK_MONOTONIC in nanoseconds, the clock of every time in a trace (its header's clock_id).
//
// Why not clock_gettime alone: the hook reads the clock on every event, and a read through the vDSO costs 20-36 ns
// (bench/clock_cost.c), about a third of what an event costs without its stack. Where the kernel keeps
// CLOCK_MONOTONIC on the CPU's time-stamp counter itself (its clocksource is "tsc": a counter at a constant rate that
// agrees across CPUs, which the kernel checked at boot and keeps watching), NowNs() reads the counter (rdtsc) and
// scales it. The scale comes from pairs of (counter, clock_gettime) read together: one at the start, then one when
// the flush thread wakes (at least every flush period) and kMinCalibrationNs have passed since the last. Until the
// first such calibration, and wherever the counter is not the kernel's clock, NowNs() is clock_gettime.
//
// Staying on CLOCK_MONOTONIC: each new scale starts where the one before ends (so times never step back) and is set
// to meet CLOCK_MONOTONIC at the next calibration, as NTP slews the kernel's clock; the difference found at a
// calibration, before it is corrected, is the largest error of the times since the one before (ClockHealth), give or
// take half the width of the two calibrations' own reads (each at most 1 us wide, else not taken).
// A difference over kMaxSlewNs is not slewed but stepped.
//
// Never: allocate, lock or block. A reader of the scale retries while the flush thread publishes a new one (a
// sequence lock); the flush thread publishes holding the recorder's lock, which fork() takes, so a forked child
// never sees a scale half written.
#ifndef CUMEMTRACE_PRELOAD_CLOCK_H_
#define CUMEMTRACE_PRELOAD_CLOCK_H_

#include <stdint.h>
#include <time.h>

#include <atomic>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace cumemtrace::preload {

// A counter read and CLOCK_MONOTONIC read at the same moment.
struct ClockPair {
  uint64_t ticks;
  int64_t ns;
};

// ns(ticks) = ns + (ticks - ticks_base) * ns_per_tick_fixed / 2^kClockScaleShift. 48 bits of fraction: a scale
// kept for ten hours of a 3 GHz counter is off by less than half a nanosecond for its rounding, and a counter as
// slow as 1 MHz still fits the rate in 64 bits.
inline constexpr int kClockScaleShift = 48;
struct ClockScale {
  uint64_t ticks_base;
  int64_t ns;
  uint64_t ns_per_tick_fixed;
};

inline constexpr int64_t kMinCalibrationNs = 100 * 1000 * 1000;  // a rate measured over less is not trusted
inline constexpr int64_t kMaxSlewNs = 1000 * 1000;                // a larger difference is stepped, not slewed

// The time `ticks` stands for on `scale`.
inline int64_t ScaleTicks(const ClockScale& scale, uint64_t ticks) {
  using Wide = unsigned __int128;
  if (ticks >= scale.ticks_base) {
    return scale.ns +
           static_cast<int64_t>((Wide{ticks - scale.ticks_base} * scale.ns_per_tick_fixed) >> kClockScaleShift);
  }
  return scale.ns -
         static_cast<int64_t>((Wide{scale.ticks_base - ticks} * scale.ns_per_tick_fixed) >> kClockScaleShift);
}

// The scale to use from `now` on, given the pair of the calibration before (`previous`) and, if `current` is not
// null, the scale in use: continuous with `current` at now.ticks, and meeting CLOCK_MONOTONIC again one more
// interval like the one from `previous` to `now` later. Without a current scale, or where the difference is over
// kMaxSlewNs, it starts at now.ns. *error_ns: `current` at now.ticks minus now.ns (0 without one). Returns false, and
// changes nothing, where the two pairs cannot give a rate (no time or no ticks between them).
bool NextClockScale(const ClockScale* current, ClockPair previous, ClockPair now, ClockScale* next,
                    int64_t* error_ns);

// What a trace says of its clock (its trailer).
struct ClockHealth {
  uint64_t calibrations;    // scales published; 0: every time came from clock_gettime
  uint64_t max_error_ns;    // the largest |difference| a calibration found between the scale and CLOCK_MONOTONIC
  uint64_t steps;           // differences over kMaxSlewNs, stepped
};

// The reader's side, inline: every event reads it.
namespace clock_internal {
extern std::atomic<bool> g_use_ticks;
extern std::atomic<uint32_t> g_sequence;  // odd while the flush thread writes the scale
extern std::atomic<uint64_t> g_ticks_base;
extern std::atomic<int64_t> g_ns;
extern std::atomic<uint64_t> g_ns_per_tick_fixed;
}  // namespace clock_internal

inline int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int64_t NowNs() {
#if defined(__x86_64__)
  namespace ci = clock_internal;
  if (ci::g_use_ticks.load(std::memory_order_acquire)) {  // pairs with the release after the first scale
    for (int attempt = 0; attempt < 4; ++attempt) {
      const uint32_t before = ci::g_sequence.load(std::memory_order_acquire);
      ClockScale scale{ci::g_ticks_base.load(std::memory_order_relaxed), ci::g_ns.load(std::memory_order_relaxed),
                       ci::g_ns_per_tick_fixed.load(std::memory_order_relaxed)};
      std::atomic_thread_fence(std::memory_order_acquire);
      if ((before & 1) == 0 && ci::g_sequence.load(std::memory_order_relaxed) == before) {
        return ScaleTicks(scale, __rdtsc());
      }
    }
  }
#endif
  return MonotonicNs();
}

// At the start of tracing: decides whether the counter may be the clock (`allowed`: CUMEMTRACE_TSC is not 0; the
// kernel's clocksource is "tsc"; rdtsc is not turned off for this process, PR_SET_TSC) and takes the first pair.
// Once per process: a forked child that starts a trace of its own keeps its parent's scale.
void StartClock(bool allowed);
// On the flush thread, holding the recorder's lock (so that fork() never copies a scale half written): once
// kMinCalibrationNs have passed since the last pair, a new pair and a new scale.
void CalibrateClockLocked();
// On the flush thread, holding no lock (it reads a file): turns the counter off for good if the kernel's
// clocksource is no longer "tsc" (the kernel found the counter unstable).
void RecheckClocksource();
// Whether /sys says the kernel's clocksource is the time-stamp counter.
bool ClocksourceIsTsc();
// A forked child's trace counts its own calibrations.
void ResetClockHealth();
ClockHealth ClockHealthNow();

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_CLOCK_H_
