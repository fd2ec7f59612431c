// The preload's clock (preload/clock.h) against CLOCK_MONOTONIC read by the program itself: every allocation's time
// in the trace lies between the two clock_gettime calls around it. Where the kernel's clocksource is the CPU's
// counter, the trace's times come from that counter (the trailer counts its scales); with CUMEMTRACE_TSC=0, and on
// machines whose clocksource is another, from clock_gettime. Tolerance: none for clock_gettime; for the counter, the
// largest difference the trace's own calibrations found (clock_max_error_ns) plus the width of one calibration's
// reading (1 us at most allowed here).
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "e2e_support.h"
#include "proto/format.h"

namespace cumemtrace::e2e {
namespace {

struct Bracket {
  int64_t before_ns;
  int64_t after_ns;
  uint64_t size;
};

std::vector<Bracket> ReadBrackets(const RunResult& run) {
  std::ifstream in(run.dir + "/clocked.txt");
  std::vector<Bracket> out;
  Bracket b{};
  while (in >> b.before_ns >> b.after_ns >> b.size) out.push_back(b);
  return out;
}

bool KernelClockIsTsc() {
  std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  in >> name;
  return name == "tsc";
}

void ExpectTimesWithinTheProgramsReads(bool tsc_allowed) {
  SCOPED_TRACE(tsc_allowed ? "CUMEMTRACE_TSC unset" : "CUMEMTRACE_TSC=0");
  RunOptions options{.program = "clocked", .args = {"1.5"}};
  options.env = {{"CUMEMTRACE_FLUSH_MS", "100"}};
  if (!tsc_allowed) options.env.push_back({"CUMEMTRACE_TSC", "0"});
  const RunResult run = RunProgram(options);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  ASSERT_TRUE(trace.has_trailer);
  const std::vector<Bracket> brackets = ReadBrackets(run);
  ASSERT_GT(brackets.size(), 1000u);

  const bool ticks = tsc_allowed && KernelClockIsTsc();
  int64_t tolerance = 0;
  if (ticks) {
    // 1.5 s with a flush every 100 ms: a calibration at most every 100 ms once the first 100 ms have passed.
    EXPECT_GE(trace.trailer.clock_calibrations, 5u);
    EXPECT_EQ(trace.trailer.clock_steps, 0u);
    EXPECT_LT(trace.trailer.clock_max_error_ns, 50000u);
    tolerance = static_cast<int64_t>(trace.trailer.clock_max_error_ns) + 1000;
  } else {
    EXPECT_EQ(trace.trailer.clock_calibrations, 0u);
    EXPECT_EQ(trace.trailer.clock_max_error_ns, 0u);
  }

  size_t next = 0, outside = 0;
  int64_t worst_early = 0, worst_late = 0;
  for (const analyzer::Event& e : trace.events) {
    if (e.api != format::Api::kCuMemAlloc) continue;
    ASSERT_LT(next, brackets.size());
    const Bracket& b = brackets[next++];
    ASSERT_EQ(e.size, b.size) << "allocation " << next;
    worst_early = std::max(worst_early, b.before_ns - e.time_ns);
    worst_late = std::max(worst_late, e.time_ns - b.after_ns);
    if (e.time_ns < b.before_ns - tolerance || e.time_ns > b.after_ns + tolerance) ++outside;
  }
  EXPECT_EQ(next, brackets.size());
  EXPECT_EQ(outside, 0u) << "of " << next << "; at worst " << worst_early << " ns before the program's read before, "
                         << worst_late << " ns after its read after; tolerance " << tolerance << " ns";
  RemoveRunDir(run);
}

TEST(E2eClock, EveryTimeLiesBetweenTheProgramsOwnClockReads) {
  ExpectTimesWithinTheProgramsReads(true);
  ExpectTimesWithinTheProgramsReads(false);
}

}  // namespace
}  // namespace cumemtrace::e2e
