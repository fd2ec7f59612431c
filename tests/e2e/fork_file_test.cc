// Trace ownership across fork and the trace file's creation (issue 10, items 2 and 3):
// - a process that forks before its first CUDA call keeps its own trace, whoever calls CUDA first; a child writes a
//   trace only with follow-fork, under its own name; a fork storm while threads allocate leaves the parent's trace
//   exact and complete;
// - the file is created 0600, never through a planted symbolic link (nor, with CUMEMTRACE_OVERWRITE=1, over one);
// - a write failure (file size limit) leaves a trace the analyzer reads up to the failure, with a notice saying so.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/container/flat_hash_map.h"
#include "analyzer/commands/run_cli.h"
#include "analyzer/model/trace_info.h"
#include "e2e_support.h"
#include "proto/format.h"

namespace cumemtrace::e2e {
namespace {

namespace fs = std::filesystem;

long ReadCount(const RunResult& run) {
  std::ifstream in(run.dir + "/count.txt");
  long count = -1;
  in >> count;
  return count;
}

std::vector<std::string> TracesIn(const RunResult& run) {
  std::vector<std::string> traces;
  for (const auto& entry : fs::directory_iterator(run.dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 3 && name.substr(name.size() - 3) == ".pb") traces.push_back(entry.path().string());
  }
  return traces;
}

// Checks the trace's events are in exact order and pair up; returns the number of allocations.
long CheckExact(const CollectedTrace& trace) {
  uint64_t previous = 0;
  long allocations = 0;
  absl::flat_hash_map<uint64_t, uint64_t> live;
  for (const analyzer::Event& e : trace.events) {
    EXPECT_GT(e.seq, previous);
    previous = e.seq;
    if (e.info->op == format::Op::kAlloc) {
      ++allocations;
      EXPECT_TRUE(live.emplace(e.address, e.size).second) << "allocation at a live address";
    } else {
      EXPECT_EQ(live.erase(e.address), 1u) << "free of nothing live";
    }
  }
  EXPECT_EQ(trace.stats.late_events, 0u);
  return allocations;
}

TEST(E2eForkOwnership, ForkBeforeCudaKeepsTheParentsTraceAndNoChildTraces) {
  // A fixed name (no %p): the case where a child used to take the parent's file.
  const RunResult run = RunProgram({.program = "storm",
                                    .env = {{"CUMEMTRACE_OUTPUT", "run.pb"}},
                                    .args = {"fork-first", "8"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::vector<std::string> traces = TracesIn(run);
  ASSERT_EQ(traces.size(), 1u) << run.Describe();
  const CollectedTrace trace = CollectTrace(run.dir + "/run.pb");
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  EXPECT_EQ(trace.header.pid, run.pid);
  EXPECT_FALSE(trace.header.forked_child);
  EXPECT_TRUE(trace.has_trailer);
  EXPECT_EQ(CheckExact(trace), ReadCount(run));
  EXPECT_EQ(trace.events.size(), 2u * static_cast<size_t>(ReadCount(run)));
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

TEST(E2eForkOwnership, ForkBeforeCudaWithFollowForkGivesEachChildItsOwnFile) {
  const RunResult run = RunProgram({.program = "storm",
                                    .env = {{"CUMEMTRACE_OUTPUT", "run.pb"}, {"CUMEMTRACE_FOLLOW_FORK", "1"}},
                                    .args = {"fork-first", "4"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::vector<std::string> traces = TracesIn(run);
  EXPECT_EQ(traces.size(), 5u) << run.Describe();
  int children = 0;
  for (const std::string& path : traces) {
    const CollectedTrace trace = CollectTrace(path);
    ASSERT_TRUE(trace.status.ok()) << path << ": " << trace.status;
    if (trace.header.pid == run.pid) {
      EXPECT_EQ(path, run.dir + "/run.pb");
      EXPECT_FALSE(trace.header.forked_child);
      EXPECT_EQ(CheckExact(trace), ReadCount(run));
    } else {
      ++children;
      EXPECT_TRUE(trace.header.forked_child) << path;
      EXPECT_EQ(trace.header.ppid, run.pid);
      EXPECT_NE(path, run.dir + "/run.pb");
      EXPECT_LE(CheckExact(trace), 20);  // children end with _exit: what the flush thread wrote by then
    }
  }
  EXPECT_EQ(children, 4);
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

TEST(E2eForkOwnership, ForkStormWhileThreadsAllocateLeavesTheParentsTraceExact) {
  for (const bool follow : {false, true}) {
    SCOPED_TRACE(follow ? "follow-fork" : "default");
    const RunResult run =
        RunProgram({.program = "storm",
                    .env = {{"CUMEMTRACE_OUTPUT", "run.%p.pb"}, {"CUMEMTRACE_FOLLOW_FORK", follow ? "1" : "0"},
                            {"FAKE_CUDA_LEDGER", ""}, {"CUMEMTRACE_FLUSH_MS", "5"}},
                    .args = {"fork-storm", "32"}});
    ASSERT_EQ(run.exit_code, 0) << run.Describe();
    const CollectedTrace parent = CollectTrace(run.dir + "/run." + std::to_string(run.pid) + ".pb");
    ASSERT_TRUE(parent.status.ok()) << parent.status << run.Describe();
    EXPECT_TRUE(parent.has_trailer);
    EXPECT_EQ(CheckExact(parent), ReadCount(run));
    EXPECT_EQ(parent.events.size(), 2u * static_cast<size_t>(ReadCount(run)));
    const size_t traces = TracesIn(run).size();
    if (follow) {
      EXPECT_GE(traces, 1u);  // children _exit: a child's trace exists once its first event was flushed
      for (const std::string& path : TracesIn(run)) {
        const CollectedTrace t = CollectTrace(path);
        EXPECT_TRUE(t.status.ok()) << path << ": " << t.status;
        if (t.header.pid != run.pid) {
          EXPECT_TRUE(t.header.forked_child);
        }
        CheckExact(t);
      }
    } else {
      EXPECT_EQ(traces, 1u) << run.Describe();
    }
    if (!testing::Test::HasFailure()) RemoveRunDir(run);
  }
}

// A planted link at the trace's name is never followed: nothing is traced and the link and its target are
// untouched, with or without overwrite (CUMEMTRACE_OVERWRITE=1 replaces only a regular file: robust_output_test.cc).
TEST(E2eFiles, PlantedSymlinkIsNeverFollowed) {
  for (const bool overwrite : {false, true}) {
    SCOPED_TRACE(overwrite ? "overwrite" : "default");
    const std::string dir = fs::temp_directory_path() / ("cumemtrace-link-" + std::to_string(getpid()));
    fs::create_directories(dir);
    const std::string victim = dir + "/victim.txt";
    const std::string link = dir + "/trace.pb";
    { std::ofstream(victim) << "precious\n"; }
    fs::create_symlink(victim, link);
    const RunResult run = RunProgram(
        {.program = "direct", .env = {{"CUMEMTRACE_OUTPUT", link}, {"CUMEMTRACE_OVERWRITE", overwrite ? "1" : "0"}}});
    EXPECT_EQ(run.exit_code, 0) << run.Describe();
    std::ifstream in(victim);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(content, "precious\n");
    EXPECT_TRUE(fs::is_symlink(link));
    EXPECT_EQ(fs::read_symlink(link).string(), victim);
    for (const auto& entry : fs::directory_iterator(dir)) {
      EXPECT_EQ(entry.path().string().find("cumemtrace-new"), std::string::npos) << "temporary file left behind";
    }
    fs::remove_all(dir);
    if (!testing::Test::HasFailure()) RemoveRunDir(run);
  }
}

TEST(E2eFiles, TraceIsPrivate) {
  const RunResult run = RunProgram({.program = "direct"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  struct stat st {};
  ASSERT_EQ(stat(run.trace_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// A file size limit (as a full disk would): the trace ends at its last whole packet with a write_failed notice, the
// analyzer reads it and says why it is incomplete, and the program runs on.
TEST(E2eFiles, WriteFailureIsRecordedInTheTrace) {
  const std::string program = ProgramPath("storm");
  const RunResult run = RunProgram(
      {.program = "storm",
       // Plain batches, as large as their events: the limit is met.
       .env = {{"FAKE_CUDA_LEDGER", ""}, {"CUMEMTRACE_STACK_DEPTH", "4"}, {"CUMEMTRACE_COMPRESS", "0"}},
       .program_path = "/bin/sh",
       .args = {"-c", "ulimit -f 1024 && trap '' XFSZ && exec \"$0\" threads 4 50000", program}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::string path = run.dir + "/trace." + std::to_string(run.pid) + ".pb";
  const CollectedTrace trace = CollectTrace(path);
  ASSERT_TRUE(trace.status.ok()) << trace.status << run.Describe();
  EXPECT_FALSE(trace.has_trailer);
  EXPECT_GT(trace.events.size(), 0u);  // 512 KiB of it (dash's ulimit -f counts 512-byte blocks)
  EXPECT_LT(trace.events.size(), 400000u);
  EXPECT_FALSE(trace.stats.truncated) << "the failed write was cut back to whole packets";
  bool noted = false;
  for (const analyzer::NoticeInfo& n : trace.notices) noted = noted || n.code == format::NoticeCode::kWriteFailed;
  EXPECT_TRUE(noted);
  analyzer::TraceInfo info;
  info.path = path;
  info.stats = trace.stats;
  info.notices = trace.notices;
  EXPECT_NE(analyzer::TraceWarning(info).find("could not write"), std::string::npos) << analyzer::TraceWarning(info);
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

}  // namespace
}  // namespace cumemtrace::e2e
