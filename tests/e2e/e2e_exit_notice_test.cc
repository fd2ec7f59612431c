// The line that says where the trace went ("cumemtrace: wrote PATH (N events, SIZE): cumem-analyze PATH"): printed
// once by the process that traced, with the trailer's own event count, silenced by CUMEMTRACE_QUIET=1, and never
// printed by a process that traced nothing (a passive exec'd child, a disabled preload). The other e2e tests run
// with CUMEMTRACE_QUIET=1 (e2e_support.cc), so these set it to 0 themselves.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "e2e_support.h"

namespace cumemtrace::e2e {
namespace {

std::vector<std::string> WroteLines(const RunResult& run) {
  std::ifstream err(run.dir + "/stderr.txt");
  std::vector<std::string> lines;
  for (std::string line; std::getline(err, line);) {
    if (line.rfind("cumemtrace: wrote ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

// 56000 -> "56 000", as the preload writes it.
std::string Grouped(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ' ';
    out += digits[i];
  }
  return out;
}

TEST(E2eExitNotice, OneLineNamesTheTraceItsEventsAndTheCommand) {
  const RunResult run = RunProgram({.program = "direct", .env = {{"CUMEMTRACE_QUIET", "0"}}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::vector<std::string> lines = WroteLines(run);
  ASSERT_EQ(lines.size(), 1u) << run.Describe();
  const CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  ASSERT_TRUE(trace.has_trailer);
  const std::string expected_start = "cumemtrace: wrote " + run.trace_path + " (" +
                                     Grouped(trace.trailer.events) + " events, ";
  EXPECT_EQ(lines[0].rfind(expected_start, 0), 0u) << lines[0] << "\nexpected to start with " << expected_start;
  const std::string expected_end = "): cumem-analyze " + run.trace_path;
  ASSERT_GE(lines[0].size(), expected_end.size());
  EXPECT_EQ(lines[0].substr(lines[0].size() - expected_end.size()), expected_end) << lines[0];
  RemoveRunDir(run);
}

// A relative output path lands in the folder the program was in at its first CUDA call; the line gives the absolute
// path when that is not the folder it was started in, so the command it prints works from there.
TEST(E2eExitNotice, AProgramThatChangedItsFolderGetsTheAbsolutePath) {
  const RunResult run = RunProgram({.program = "direct",
                                    .env = {{"CUMEMTRACE_QUIET", "0"}, {"CUMEMTRACE_OUTPUT", "moved.%p.pb"}},
                                    .args = {"elsewhere"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::string path = run.dir + "/elsewhere/moved." + std::to_string(run.pid) + ".pb";
  const CollectedTrace trace = CollectTrace(path);
  ASSERT_TRUE(trace.status.ok()) << trace.status << "\n" << run.Describe();
  const std::vector<std::string> lines = WroteLines(run);
  ASSERT_EQ(lines.size(), 1u) << run.Describe();
  EXPECT_EQ(lines[0].rfind("cumemtrace: wrote " + path + " (", 0), 0u) << lines[0];
  const std::string expected_end = "): cumem-analyze " + path;
  ASSERT_GE(lines[0].size(), expected_end.size());
  EXPECT_EQ(lines[0].substr(lines[0].size() - expected_end.size()), expected_end) << lines[0];
  RemoveRunDir(run);
}

// The same relative path from a program that stays in its folder is printed as given.
TEST(E2eExitNotice, ARelativePathIsPrintedAsGiven) {
  const RunResult run = RunProgram({.program = "direct",
                                    .env = {{"CUMEMTRACE_QUIET", "0"}, {"CUMEMTRACE_OUTPUT", "stayed.%p.pb"}}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::string name = "stayed." + std::to_string(run.pid) + ".pb";
  const std::vector<std::string> lines = WroteLines(run);
  ASSERT_EQ(lines.size(), 1u) << run.Describe();
  EXPECT_EQ(lines[0].rfind("cumemtrace: wrote " + name + " (", 0), 0u) << lines[0];
  EXPECT_TRUE(CollectTrace(run.dir + "/" + name).status.ok()) << run.Describe();
  RemoveRunDir(run);
}

TEST(E2eExitNotice, QuietSilencesIt) {
  const RunResult run = RunProgram({.program = "direct", .env = {{"CUMEMTRACE_QUIET", "1"}}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  EXPECT_TRUE(WroteLines(run).empty()) << run.Describe();
  RemoveRunDir(run);
}

TEST(E2eExitNotice, APassiveExecdChildSaysNothing) {
  const RunResult run = RunProgram({.program = "exec", .env = {{"CUMEMTRACE_QUIET", "0"}}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::vector<std::string> lines = WroteLines(run);
  ASSERT_EQ(lines.size(), 1u) << run.Describe();  // the parent's own
  EXPECT_NE(lines[0].find(run.trace_path), std::string::npos) << lines[0];
  RemoveRunDir(run);
}

TEST(E2eExitNotice, ADisabledPreloadSaysNothing) {
  const RunResult run =
      RunProgram({.program = "direct", .env = {{"CUMEMTRACE_QUIET", "0"}, {"CUMEMTRACE_DISABLE", "1"}}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  EXPECT_TRUE(WroteLines(run).empty()) << run.Describe();
  RemoveRunDir(run);
}

}  // namespace
}  // namespace cumemtrace::e2e
