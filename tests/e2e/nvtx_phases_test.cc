// End-to-end tests of phases (preload/nvtx_injection.cc, analyzer/model/usage/phases.cc): a program that uses the real
// NVTX 3 header (tests/e2e/programs/nvtx_phases.cc) runs under the preload with NVTX_INJECTION64_PATH naming it;
// the trace's Phase packets must be exactly what the program did, in order and placed among its events, and the
// analyzer's peak inside each phase must be the one the program's allocations make. Without the variable, or with
// CUMEMTRACE_NVTX=0, there are no phases and the program runs the same; the launcher sets the variable itself.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analyzer/model/analysis.h"
#include "analyzer/reader/trace_reader.h"
#include "gtest/gtest.h"
#include "proto/format.h"
#include "tests/e2e/e2e_support.h"

namespace cumemtrace::e2e {
namespace {

using analyzer::PhaseInfo;
using format::PhaseKind;

constexpr uint64_t kMiB = 1ull << 20;

class PhaseCollector : public analyzer::TraceVisitor {
 public:
  void OnPhase(const PhaseInfo& phase) override { phases.push_back(phase); }
  void OnEvent(const analyzer::Event& event) override { events.push_back(event); }
  std::vector<PhaseInfo> phases;
  std::vector<analyzer::Event> events;
};

RunResult RunNvtxProgram(std::vector<std::pair<std::string, std::string>> env, bool nvtx) {
  RunOptions options;
  options.program = "nvtx_phases";
  if (nvtx) env.emplace_back("NVTX_INJECTION64_PATH", E2E_PRELOAD);
  options.env = std::move(env);
  return RunProgram(options);
}

std::string Describe(const PhaseInfo& p) {
  const char* kinds[] = {"?", "push", "pop", "start", "end", "mark"};
  return std::string(kinds[static_cast<int>(p.kind) % 6]) + " " + p.name + " d" + std::to_string(p.domain) +
         " @" + std::to_string(p.after_seq);
}

TEST(NvtxPhases, TheTraceHoldsWhatTheProgramDid) {
  const RunResult run = RunNvtxProgram({}, true);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  PhaseCollector trace;
  analyzer::ReadStats stats;
  ASSERT_TRUE(analyzer::ReadTrace(run.trace_path, trace, &stats).ok()) << run.Describe();
  // Events 1..18: A; 3 x (B, C, free C, free B); D, E, free E, the failed request; free A.
  ASSERT_EQ(trace.events.size(), 18u);
  std::vector<std::string> got;
  for (const PhaseInfo& p : trace.phases) got.push_back(Describe(p));
  const std::vector<std::string> expected = {
      "push setup d0 @0",  // pushed before the first CUDA memory call: kept until tracing started
      "pop  d0 @1",        "start epoch d0 @1",  "push train d0 @1",  "push step d0 @1",  "pop  d0 @5",
      "push step d0 @5",   "pop  d0 @9",         "push step d0 @9",   "pop  d0 @13",      "mark checkpoint d0 @13",
      "pop  d0 @13",       "push validate d0 @13",  // nvtxRangePushW: the wide name arrives as UTF-8
      "pop  d0 @17",       "end  d0 @17",        "push mylib.work d1 @17",  // a registered string, a domain
      "pop  d1 @18"};
  EXPECT_EQ(got, expected) << run.Describe();
  uint64_t epoch_id = 0;
  for (const PhaseInfo& p : trace.phases) {
    EXPECT_EQ(p.thread, trace.events.front().thread);
    if (p.kind == PhaseKind::kStart) epoch_id = p.range_id;
    if (p.kind == PhaseKind::kEnd) {
      EXPECT_EQ(p.range_id, epoch_id);
    }
  }
  EXPECT_NE(epoch_id, 0u);
  RemoveRunDir(run);
}

uint64_t PeakTotal(const analyzer::Analysis& a) {
  const analyzer::PeakResult* p = a.FindPeak(0, analyzer::kDeviceTotalSeries);
  return p == nullptr ? 0 : p->counter.peak_bytes;
}

TEST(NvtxPhases, PeakPerPhaseAndReportsInsideOnePhase) {
  const RunResult run = RunNvtxProgram({}, true);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  analyzer::AnalyzeOptions options;
  auto all = analyzer::Analyze(run.trace_path, options);
  ASSERT_TRUE(all.ok()) << all.status();
  // Peak per phase, from one read.
  std::map<std::string, uint64_t> peaks;
  for (const analyzer::PhaseSummary& s : (*all)->phases.phases) {
    for (const analyzer::PhasePeak& p : s.peaks) {
      if (p.device == 0 && p.series == analyzer::kDeviceTotalSeries) peaks[s.name] = p.peak_bytes;
    }
  }
  const std::map<std::string, uint64_t> expected = {{"setup", 4 * kMiB},      {"epoch", 28 * kMiB},
                                                    {"train", 28 * kMiB},     {"step", 28 * kMiB},
                                                    {"validate", 7 * kMiB},   {"mylib.work", 6 * kMiB}};
  EXPECT_EQ(peaks, expected);
  EXPECT_EQ((*all)->phases.ranges.size(), 8u);
  EXPECT_EQ((*all)->phases.marks, 1u);
  // The failed request and the leak name validate.
  ASSERT_EQ((*all)->ooms.size(), 1u);
  EXPECT_EQ((*all)->ooms[0].phase, "validate");
  ASSERT_EQ((*all)->leaks.size(), 1u);
  EXPECT_EQ((*all)->leaks[0].phase, "validate");

  // --phase: every report inside that phase only.
  options.phase_filter.phase = "validate";
  auto validate = analyzer::Analyze(run.trace_path, options);
  ASSERT_TRUE(validate.ok());
  EXPECT_EQ(PeakTotal(**validate), 7 * kMiB);  // A (live when it opened) + D + E
  EXPECT_EQ((*validate)->ooms.size(), 1u);
  EXPECT_EQ((*validate)->leaks.size(), 1u);
  options.phase_filter.phase = "train";
  auto train = analyzer::Analyze(run.trace_path, options);
  ASSERT_TRUE(train.ok());
  EXPECT_EQ(PeakTotal(**train), 28 * kMiB);
  EXPECT_TRUE((*train)->ooms.empty());
  EXPECT_TRUE((*train)->leaks.empty());  // D was allocated in validate
  options.phase_filter.phase = "no such phase";
  auto none = analyzer::Analyze(run.trace_path, options);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(PeakTotal(**none), 0u);
  EXPECT_EQ((*none)->phases.filter_events, 0u);
  RemoveRunDir(run);
}

TEST(NvtxPhases, NoPhasesWithoutTheVariableOrWithNvtxOff) {
  for (const bool variable : {false, true}) {
    std::vector<std::pair<std::string, std::string>> env;
    if (variable) env.emplace_back("CUMEMTRACE_NVTX", "0");
    const RunResult run = RunNvtxProgram(env, variable);
    ASSERT_EQ(run.exit_code, 0) << run.Describe();
    PhaseCollector trace;
    analyzer::ReadStats stats;
    ASSERT_TRUE(analyzer::ReadTrace(run.trace_path, trace, &stats).ok()) << run.Describe();
    EXPECT_EQ(trace.events.size(), 18u);
    EXPECT_TRUE(trace.phases.empty()) << variable;
    RemoveRunDir(run);
  }
}

TEST(NvtxPhases, TheLauncherNamesTheLibraryToNvtx) {
  RunOptions options;
  options.program = "nvtx_phases";
  options.preload = false;
  options.program_path = E2E_LAUNCHER;
  options.args = {"--", ProgramPath("nvtx_phases")};
  options.env = {{"CUMEMTRACE_LIB", E2E_PRELOAD}};
  const RunResult run = RunProgram(options);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  PhaseCollector trace;
  analyzer::ReadStats stats;
  ASSERT_TRUE(analyzer::ReadTrace(run.trace_path, trace, &stats).ok()) << run.Describe();
  EXPECT_EQ(trace.phases.size(), 17u);
  RemoveRunDir(run);
}

}  // namespace
}  // namespace cumemtrace::e2e
