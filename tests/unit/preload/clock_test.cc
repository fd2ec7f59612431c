// The clock's scale arithmetic (NextClockScale, ScaleTicks) on made-up pairs, and the clock itself against
// clock_gettime where this machine's kernel keeps CLOCK_MONOTONIC on the CPU's counter.
#include "preload/clock.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>

#include <gtest/gtest.h>

namespace cumemtrace::preload {
namespace {

constexpr uint64_t kTicksPerSecond = 3'000'000'000;  // a 3 GHz counter
constexpr int64_t kSecond = 1'000'000'000;

// The scale of a counter at kTicksPerSecond running `ns_per_second` nanoseconds a second.
uint64_t Rate(int64_t ns_per_second) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ns_per_second) << kClockScaleShift) / kTicksPerSecond);
}

TEST(ClockScale, WithoutAScaleStartsAtThePairsTimeAndKeepsItsRate) {
  const ClockPair previous{1'000'000, 5 * kSecond};
  const ClockPair now{previous.ticks + kTicksPerSecond, previous.ns + kSecond};
  ClockScale next{};
  int64_t error = -1;
  ASSERT_TRUE(NextClockScale(nullptr, previous, now, &next, &error));
  EXPECT_EQ(error, 0);
  EXPECT_EQ(ScaleTicks(next, now.ticks), now.ns);
  EXPECT_NEAR(ScaleTicks(next, now.ticks + 3 * kTicksPerSecond), now.ns + 3 * kSecond, 1);
  EXPECT_NEAR(ScaleTicks(next, now.ticks - kTicksPerSecond / 2), now.ns - kSecond / 2, 1);
}

TEST(ClockScale, ANewScaleGoesOnFromTheOldAndMeetsTheClockOneIntervalLater) {
  const ClockPair previous{0, 0};
  const ClockPair now{kTicksPerSecond, kSecond};
  // The scale in use runs 200 ppm fast: 200 us ahead of the clock at `now`.
  const ClockScale fast{0, 0, Rate(kSecond + 200'000)};
  ClockScale next{};
  int64_t error = 0;
  ASSERT_TRUE(NextClockScale(&fast, previous, now, &next, &error));
  EXPECT_NEAR(error, 200'000, 1);
  EXPECT_EQ(ScaleTicks(next, now.ticks), ScaleTicks(fast, now.ticks));  // no step at the change
  EXPECT_NEAR(ScaleTicks(next, now.ticks + kTicksPerSecond), now.ns + kSecond, 1);
  // Times never go back across the change.
  int64_t last = INT64_MIN;
  for (uint64_t t = now.ticks - 3000; t < now.ticks + 3000; t += 7) {
    const int64_t ns = t < now.ticks ? ScaleTicks(fast, t) : ScaleTicks(next, t);
    EXPECT_GE(ns, last) << t;
    last = ns;
  }
}

TEST(ClockScale, ADifferenceOverTheSlewLimitIsStepped) {
  const ClockPair previous{0, 0};
  const ClockPair now{kTicksPerSecond, kSecond};
  const ClockScale behind{0, -5'000'000, Rate(kSecond)};
  ClockScale next{};
  int64_t error = 0;
  ASSERT_TRUE(NextClockScale(&behind, previous, now, &next, &error));
  EXPECT_NEAR(error, -5'000'000, 1);
  EXPECT_EQ(ScaleTicks(next, now.ticks), now.ns);
}

TEST(ClockScale, PairsWithoutTimeOrTicksBetweenGiveNoScale) {
  ClockScale next{1, 2, 3};
  int64_t error = 7;
  EXPECT_FALSE(NextClockScale(nullptr, ClockPair{100, 100}, ClockPair{100, 200}, &next, &error));
  EXPECT_FALSE(NextClockScale(nullptr, ClockPair{100, 100}, ClockPair{200, 100}, &next, &error));
  EXPECT_FALSE(NextClockScale(nullptr, ClockPair{200, 100}, ClockPair{100, 200}, &next, &error));
  EXPECT_EQ(next.ticks_base, 1u);
  EXPECT_EQ(error, 7);
}

TEST(ClockScale, HoursOfTicksDoNotOverflow) {
  const ClockPair previous{0, 0};
  const int64_t hours = 10 * 3600 * kSecond;
  const ClockPair now{10 * 3600 * kTicksPerSecond, hours};
  ClockScale next{};
  int64_t error = 0;
  ASSERT_TRUE(NextClockScale(nullptr, previous, now, &next, &error));
  EXPECT_NEAR(ScaleTicks(next, now.ticks + 10 * 3600 * kTicksPerSecond), 2 * hours, 1);
}

int64_t Monotonic() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kSecond + ts.tv_nsec;
}

// The clock itself: once calibrated, every reading lies between clock_gettime's reads around it, give or take the
// difference the calibrations found (plus 1 us for the width of their own reads), and never goes back.
TEST(Clock, ReadsTheCounterOnlyWhereTheKernelDoesAndStaysOnItsClock) {
  StartClock(true);
  usleep(kMinCalibrationNs / 1000 + 20'000);
  CalibrateClockLocked();
#if defined(__x86_64__)
  if (!ClocksourceIsTsc()) {
    EXPECT_EQ(ClockHealthNow().calibrations, 0u);
    GTEST_SKIP() << "this kernel's clocksource is not tsc: NowNs() is clock_gettime here";
  }
  ASSERT_EQ(ClockHealthNow().calibrations, 1u);
  int64_t last = NowNs();
  int64_t worst = 0;
  for (int round = 0; round < 3; ++round) {
    const int64_t until = Monotonic() + 110'000'000;
    while (Monotonic() < until) {
      const int64_t before = Monotonic();
      const int64_t now = NowNs();
      const int64_t after = Monotonic();
      worst = std::max({worst, before - now, now - after});
      EXPECT_GE(now, last);
      last = now;
    }
    CalibrateClockLocked();
  }
  const ClockHealth health = ClockHealthNow();
  EXPECT_EQ(health.calibrations, 4u);
  EXPECT_EQ(health.steps, 0u);
  EXPECT_LE(worst, static_cast<int64_t>(health.max_error_ns) + 1000) << "max_error_ns " << health.max_error_ns;
#else
  EXPECT_EQ(ClockHealthNow().calibrations, 0u);
#endif
}

}  // namespace
}  // namespace cumemtrace::preload
