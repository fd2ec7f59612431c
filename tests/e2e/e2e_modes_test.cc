// End-to-end tests of the preload's modes (the environment of docs/format.md's "Configuration"): %r and the rank
// header fields, CUMEMTRACE_FOLLOW_FORK, the exec rule (CUMEMTRACE_ROOT_PID / CUMEMTRACE_FOLLOW_EXEC), driver
// memory samples (CUMEMTRACE_SAMPLE_MS) and CUPTI as a second source (CUMEMTRACE_CUPTI, with the fake libcupti).
//
// The oracle is the fake driver's ledger, as in e2e_test.cc: which process made which call, and (for samples) the
// fake's own accounting of device memory, replayed from the ledger (device, managed and pool allocations take
// their size rounded up to 512 bytes, cuMemCreate handles their size, against FAKE_CUDA_TOTAL_BYTES).
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/reader/trace_reader.h"
#include "e2e_support.h"
#include "proto/format.h"

namespace cumemtrace::e2e {
namespace {

using analyzer::Event;
using format::NoticeCode;

// programs/cupti.cc's FakeCudaInternalAlloc size.
constexpr uint64_t kInternalBytes = 3 * (1ull << 20) + 7 * 512;

class ModesTest : public testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) return;
    for (const RunResult& run : runs_) RemoveRunDir(run);
  }

  // Runs `program` and reads its ledger; the run's folder is removed at the end unless the test failed.
  RunResult Run(const std::string& program, std::vector<std::pair<std::string, std::string>> env = {},
                bool preload = true) {
    return Run(RunOptions{.program = program, .preload = preload, .env = std::move(env)});
  }
  RunResult Run(const RunOptions& options) {
    runs_.push_back(RunProgram(options));
    RunResult& run = runs_.back();
    EXPECT_FALSE(run.timed_out) << run.Describe();
    EXPECT_EQ(run.term_signal, 0) << run.Describe();
    std::vector<LedgerEntry> ledger;
    EXPECT_TRUE(ReadLedger(run.ledger_path, &ledger).ok()) << run.Describe();
    ledgers_[run.dir] = ledger;
    return run;
  }

  const std::vector<LedgerEntry>& LedgerOf(const RunResult& run) { return ledgers_[run.dir]; }

  CollectedTrace Trace(const RunResult& run, const std::string& path) {
    CollectedTrace trace = CollectTrace(path);
    EXPECT_TRUE(trace.status.ok()) << path << ": " << trace.status << "\n" << run.Describe();
    return trace;
  }

  std::vector<RunResult> runs_;
  std::map<std::string, std::vector<LedgerEntry>> ledgers_;
};

std::vector<std::string> StderrLines(const RunResult& run, const std::string& containing) {
  std::ifstream err(run.dir + "/stderr.txt");
  std::vector<std::string> lines;
  for (std::string line; std::getline(err, line);) {
    if (line.find(containing) != std::string::npos) lines.push_back(line);
  }
  return lines;
}

std::set<int> OtherPids(const std::vector<LedgerEntry>& ledger, int pid) {
  std::set<int> pids;
  for (const LedgerEntry& e : ledger) {
    if (e.pid != pid) pids.insert(e.pid);
  }
  return pids;
}

int CountNotices(const CollectedTrace& trace, NoticeCode code) {
  return static_cast<int>(std::count_if(trace.notices.begin(), trace.notices.end(),
                                        [code](const analyzer::NoticeInfo& n) { return n.code == code; }));
}

// ---- %r and the rank fields ----

struct RankCase {
  const char* name;
  std::vector<std::pair<std::string, std::string>> env;
  std::string file;  // "%PID%" is replaced by the program's pid
  int rank, local_rank, world_size;
};

TEST_F(ModesTest, RankPatternAndHeaderFields) {
  const std::vector<RankCase> cases = {
      {"rank", {{"RANK", "3"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "4"}}, "trace.3.pb", 3, 1, 4},
      {"local rank only", {{"LOCAL_RANK", "2"}}, "trace.2.pb", -1, 2, -1},
      {"neither", {}, "trace.pid%PID%.pb", -1, -1, -1},
      {"not numbers", {{"RANK", "abc"}, {"WORLD_SIZE", "x8"}}, "trace.pid%PID%.pb", -1, -1, -1},
  };
  for (const RankCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto env = c.env;
    // Relative to the run's own folder, where the program runs.
    env.emplace_back("CUMEMTRACE_OUTPUT", "trace.%r.pb");
    const RunResult ranked = Run("direct", env);
    ASSERT_EQ(ranked.exit_code, 0) << ranked.Describe();
    std::string file = c.file;
    const size_t at = file.find("%PID%");
    if (at != std::string::npos) file.replace(at, 5, std::to_string(ranked.pid));
    const std::string path = ranked.dir + "/" + file;
    ASSERT_TRUE(std::filesystem::exists(path)) << "expected " << file << "\n" << ranked.Describe();
    const CollectedTrace trace = Trace(ranked, path);
    EXPECT_EQ(trace.header.pid, ranked.pid);
    EXPECT_EQ(trace.header.rank, c.rank);
    EXPECT_EQ(trace.header.local_rank, c.local_rank);
    EXPECT_EQ(trace.header.world_size, c.world_size);
    EXPECT_EQ(MultisetDifference(LedgerKeys(LedgerOf(ranked), false), EventKeys(trace, false)), "");
  }
}

// ---- Fork ----

// CUMEMTRACE_FOLLOW_FORK=1: the child writes its own trace (its events are exactly the child's ledger lines, its
// header says forked_child with the parent's pid), written by its own flush thread before _exit; the parent's trace
// is exactly the parent's.
TEST_F(ModesTest, FollowForkGivesTheChildItsOwnTrace) {
  for (const bool pattern_has_pid : {true, false}) {
    SCOPED_TRACE(pattern_has_pid ? "trace.%p.pb" : "run.pb");
    std::vector<std::pair<std::string, std::string>> env = {
        {"CUMEMTRACE_FOLLOW_FORK", "1"}, {"CUMEMTRACE_FLUSH_MS", "20"}, {"E2E_CHILD_LINGER_MS", "400"}};
    if (!pattern_has_pid) env.emplace_back("CUMEMTRACE_OUTPUT", "run.pb");
    const RunResult run = Run("fork", env);
    ASSERT_EQ(run.exit_code, 0) << run.Describe();
    const std::vector<LedgerEntry>& ledger = LedgerOf(run);
    const std::set<int> children = OtherPids(ledger, run.pid);
    ASSERT_EQ(children.size(), 1u);
    const int child = *children.begin();

    const std::string parent_path = pattern_has_pid ? run.trace_path : run.dir + "/run.pb";
    const std::string child_path =
        run.dir + (pattern_has_pid ? "/trace." : "/run.") + std::to_string(child) + ".pb";
    const CollectedTrace parent = Trace(run, parent_path);
    EXPECT_EQ(parent.header.pid, run.pid);
    EXPECT_FALSE(parent.header.forked_child);
    EXPECT_TRUE(parent.has_trailer);
    EXPECT_EQ(MultisetDifference(LedgerKeys(EntriesOfPid(ledger, run.pid), true), EventKeys(parent, true)), "");

    ASSERT_TRUE(std::filesystem::exists(child_path)) << run.Describe();
    const CollectedTrace traced_child = Trace(run, child_path);
    EXPECT_EQ(traced_child.header.pid, child);
    EXPECT_EQ(traced_child.header.ppid, run.pid);
    EXPECT_TRUE(traced_child.header.forked_child);
    EXPECT_FALSE(traced_child.has_trailer) << "the child ends with _exit: nothing at exit runs";
    EXPECT_EQ(MultisetDifference(LedgerKeys(EntriesOfPid(ledger, child), true), EventKeys(traced_child, true)), "");
    // Fresh tables: thread index 1 is the child's own thread, every stack resolves in the child's own nodes and
    // modules are described again.
    ASSERT_EQ(traced_child.threads.count(1u), 1u);
    EXPECT_EQ(traced_child.threads.at(1).tid, child);
    EXPECT_FALSE(traced_child.modules.empty());
    for (const Event& event : traced_child.events) {
      if (event.info->op == format::Op::kFree && event.result == 0) continue;  // frees carry no stack
      std::vector<uint64_t> pcs;
      EXPECT_TRUE(traced_child.StackPcs(event.stack, &pcs).ok()) << EventKey(traced_child, event, false);
    }
    EXPECT_EQ(traced_child.stack_nodes.begin()->first, 1u);
  }
}

// Default: the child stops tracing; no file of its own.
TEST_F(ModesTest, ForkedChildStopsByDefault) {
  const RunResult run = Run("fork", {{"CUMEMTRACE_FLUSH_MS", "20"}, {"E2E_CHILD_LINGER_MS", "200"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::set<int> children = OtherPids(LedgerOf(run), run.pid);
  ASSERT_EQ(children.size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(run.dir + "/trace." + std::to_string(*children.begin()) + ".pb"));
  const CollectedTrace parent = Trace(run, run.trace_path);
  EXPECT_EQ(MultisetDifference(LedgerKeys(EntriesOfPid(LedgerOf(run), run.pid), true), EventKeys(parent, true)), "");
}

// ---- Exec ----

TEST_F(ModesTest, ExecdChildIsPassiveByDefault) {
  const RunResult run = Run("exec");
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::set<int> children = OtherPids(LedgerOf(run), run.pid);
  ASSERT_EQ(children.size(), 1u) << "the exec'd child made no driver calls";
  EXPECT_FALSE(std::filesystem::exists(run.dir + "/trace." + std::to_string(*children.begin()) + ".pb"))
      << run.Describe();
  EXPECT_TRUE(StderrLines(run, "cumemtrace").empty()) << run.Describe();
  const CollectedTrace parent = Trace(run, run.trace_path);
  EXPECT_EQ(MultisetDifference(LedgerKeys(EntriesOfPid(LedgerOf(run), run.pid), true), EventKeys(parent, true)), "");
}

TEST_F(ModesTest, FollowExecTracesTheExecdChild) {
  const RunResult run = Run("exec", {{"CUMEMTRACE_FOLLOW_EXEC", "1"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::set<int> children = OtherPids(LedgerOf(run), run.pid);
  ASSERT_EQ(children.size(), 1u);
  const int child = *children.begin();
  const CollectedTrace traced_child = Trace(run, run.dir + "/trace." + std::to_string(child) + ".pb");
  EXPECT_EQ(traced_child.header.pid, child);
  EXPECT_FALSE(traced_child.header.forked_child);
  EXPECT_TRUE(traced_child.has_trailer);
  EXPECT_EQ(MultisetDifference(LedgerKeys(EntriesOfPid(LedgerOf(run), child), true), EventKeys(traced_child, true)),
            "");
  const CollectedTrace parent = Trace(run, run.trace_path);
  EXPECT_EQ(MultisetDifference(LedgerKeys(EntriesOfPid(LedgerOf(run), run.pid), true), EventKeys(parent, true)), "");
}

// A wrapper that loads the preload but never allocates (LD_PRELOAD=... timeout 60 python train.py) does not keep
// the program it starts from tracing.
TEST_F(ModesTest, ProgramStartedByAWrapperTraces) {
  const RunResult run = Run(RunOptions{.program = "exec", .args = {"wrap"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  EXPECT_TRUE(EntriesOfPid(LedgerOf(run), run.pid).empty()) << "the wrapper made driver calls";
  EXPECT_FALSE(std::filesystem::exists(run.trace_path)) << run.Describe();
  const std::set<int> children = OtherPids(LedgerOf(run), run.pid);
  ASSERT_EQ(children.size(), 1u) << "the exec'd child made no driver calls";
  const int child = *children.begin();
  const CollectedTrace traced_child = Trace(run, run.dir + "/trace." + std::to_string(child) + ".pb");
  EXPECT_EQ(traced_child.header.pid, child);
  EXPECT_EQ(traced_child.header.ppid, run.pid);
  EXPECT_TRUE(traced_child.has_trailer);
  EXPECT_EQ(MultisetDifference(LedgerKeys(EntriesOfPid(LedgerOf(run), child), true), EventKeys(traced_child, true)),
            "");
}

// A process that traces keeps the programs below it passive through a wrapper between them (a shell script it
// runs), by default.
TEST_F(ModesTest, ProgramBelowATracingProcessStaysPassiveThroughAWrapper) {
  const RunResult run = Run(RunOptions{.program = "exec", .args = {"nested"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::set<int> others = OtherPids(LedgerOf(run), run.pid);
  ASSERT_EQ(others.size(), 1u) << "the grandchild made no driver calls";
  EXPECT_FALSE(std::filesystem::exists(run.dir + "/trace." + std::to_string(*others.begin()) + ".pb"))
      << run.Describe();
  size_t traces = 0;
  for (const auto& entry : std::filesystem::directory_iterator(run.dir)) {
    traces += entry.path().extension() == ".pb";
  }
  EXPECT_EQ(traces, 1u) << run.Describe();
  EXPECT_TRUE(StderrLines(run, "cumemtrace").empty()) << run.Describe();
  const CollectedTrace parent = Trace(run, run.trace_path);
  EXPECT_EQ(MultisetDifference(LedgerKeys(EntriesOfPid(LedgerOf(run), run.pid), true), EventKeys(parent, true)), "");
}

// ---- Memory samples ----

// Replays the fake driver's accounting of device memory from the ledger, line by line.
class DeviceMemoryReplay {
 public:
  void Apply(const LedgerEntry& e) {
    if (e.result != 0) return;
    const bool plain = e.api.rfind("cuMemAlloc", 0) == 0 && e.api.rfind("cuMemAllocHost", 0) != 0;
    if (e.op == "alloc" && plain) {
      const uint64_t reserved = (e.size + 511) / 512 * 512;
      live_[{0, e.address}] = {e.device, reserved};
      used_[e.device] += reserved;
    } else if (e.op == "alloc" && e.api == "cuMemCreate") {
      live_[{1, e.address}] = {e.device, e.size};
      used_[e.device] += e.size;
    } else if (e.op == "free") {
      const int space = e.api == "cuMemRelease" ? 1 : 0;
      auto it = live_.find({space, e.address});
      if (it != live_.end()) {
        used_[it->second.first] -= it->second.second;
        live_.erase(it);
      }
    }
  }
  uint64_t Used(int device) const {
    auto it = used_.find(device);
    return it == used_.end() ? 0 : it->second;
  }

 private:
  std::map<std::pair<int, uint64_t>, std::pair<int, uint64_t>> live_;
  std::map<int, uint64_t> used_;
};

// Samples (default CUMEMTRACE_SAMPLE_MS): one at the first allocation of each device at least; free/total are
// what the fake driver's accounting gives right after the event named by after_seq.
TEST_F(ModesTest, MemorySamplesMatchTheDriversAccounting) {
  const RunResult run = Run("direct");
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::vector<LedgerEntry> ledger = EntriesOfPid(LedgerOf(run), run.pid);
  const CollectedTrace trace = Trace(run, run.trace_path);
  // Single-threaded: the i-th event (by seq) is the i-th ledger line.
  ASSERT_EQ(EventKeys(trace, false), LedgerKeys(ledger, false));
  ASSERT_FALSE(trace.samples.empty());
  ASSERT_TRUE(trace.has_trailer);
  EXPECT_EQ(trace.trailer.memory_samples, trace.samples.size());
  std::map<uint64_t, size_t> index_of_seq;
  for (size_t i = 0; i < trace.events.size(); ++i) index_of_seq[trace.events[i].seq] = i;
  std::set<int> sampled_devices;
  for (const analyzer::MemorySample& sample : trace.samples) {
    auto it = index_of_seq.find(sample.after_seq);
    ASSERT_NE(it, index_of_seq.end()) << "after_seq " << sample.after_seq << " names no event";
    const Event& event = trace.events[it->second];
    ASSERT_NE(event.info, nullptr);
    EXPECT_EQ(event.info->op, format::Op::kAlloc);
    EXPECT_EQ(event.device, sample.device);
    DeviceMemoryReplay replay;
    for (size_t i = 0; i <= it->second; ++i) replay.Apply(ledger[i]);
    EXPECT_EQ(sample.total_bytes, kFakeTotalBytes);
    EXPECT_EQ(sample.free_bytes, kFakeTotalBytes - replay.Used(sample.device)) << "after seq " << sample.after_seq;
    sampled_devices.insert(sample.device);
  }
  std::set<int> allocating_devices;
  for (const Event& event : trace.events) {
    if (event.info->op == format::Op::kAlloc && event.device >= 0 &&
        event.info->kind != format::Kind::kAddressReserve && event.info->kind != format::Kind::kVmmMapped) {
      allocating_devices.insert(event.device);
    }
  }
  EXPECT_EQ(sampled_devices, allocating_devices);
  // The first sample of a device follows its first allocation.
  for (int device : sampled_devices) {
    const auto first_event = std::find_if(trace.events.begin(), trace.events.end(), [device](const Event& e) {
      return e.info->op == format::Op::kAlloc && e.device == device;
    });
    uint64_t first_sample = UINT64_MAX;
    for (const auto& s : trace.samples) {
      if (s.device == device) first_sample = std::min(first_sample, s.after_seq);
    }
    EXPECT_EQ(first_sample, first_event->seq) << "device " << device;
  }
}

// Allocations every ~10 ms for ~400 ms with CUMEMTRACE_SAMPLE_MS=50: samples at most every 50 ms, so several but
// far fewer than the allocations, each with the driver's exact free memory at its event.
TEST_F(ModesTest, SamplesAreAtMostOneIntervalApart) {
  const RunResult run = Run("paced", {{"CUMEMTRACE_SAMPLE_MS", "50"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::vector<LedgerEntry> ledger = EntriesOfPid(LedgerOf(run), run.pid);
  const CollectedTrace trace = Trace(run, run.trace_path);
  ASSERT_EQ(EventKeys(trace, false), LedgerKeys(ledger, false));
  const uint64_t allocations = std::count_if(ledger.begin(), ledger.end(), [](const LedgerEntry& e) {
    return e.op == "alloc";
  });
  ASSERT_EQ(allocations, 40u);
  EXPECT_GE(trace.samples.size(), 3u);
  EXPECT_LE(trace.samples.size(), 12u);  // ~400 ms / 50 ms, with room for a slow machine's stretched run
  std::map<uint64_t, size_t> index_of_seq;
  for (size_t i = 0; i < trace.events.size(); ++i) index_of_seq[trace.events[i].seq] = i;
  for (size_t i = 0; i < trace.samples.size(); ++i) {
    const analyzer::MemorySample& sample = trace.samples[i];
    EXPECT_EQ(sample.device, 0);
    if (i > 0) {
      EXPECT_GE(sample.time_ns - trace.samples[i - 1].time_ns, 50'000'000) << "sample " << i;
    }
    ASSERT_EQ(index_of_seq.count(sample.after_seq), 1u);
    DeviceMemoryReplay replay;
    for (size_t j = 0; j <= index_of_seq[sample.after_seq]; ++j) replay.Apply(ledger[j]);
    EXPECT_EQ(sample.free_bytes, kFakeTotalBytes - replay.Used(0)) << "sample " << i;
  }
}

TEST_F(ModesTest, SampleMsZeroTurnsSamplesOff) {
  const RunResult run = Run("direct", {{"CUMEMTRACE_SAMPLE_MS", "0"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const CollectedTrace trace = Trace(run, run.trace_path);
  EXPECT_TRUE(trace.samples.empty());
  EXPECT_EQ(trace.trailer.memory_samples, 0u);
  EXPECT_FALSE(trace.events.empty());
}

// ---- CUPTI ----

// Which ledger lines came through the fake driver's internal path (only CUPTI sees them): allocations of
// kInternalBytes and the frees of their addresses.
std::vector<LedgerEntry> InternalEntries(const std::vector<LedgerEntry>& ledger) {
  std::set<uint64_t> addresses;
  std::vector<LedgerEntry> out;
  for (const LedgerEntry& e : ledger) {
    if (e.op == "alloc" && e.size == kInternalBytes) {
      addresses.insert(e.address);
      out.push_back(e);
    } else if (e.op == "free" && addresses.count(e.address) > 0 && e.api == "cuMemFree_v2" && e.via.empty()) {
      // cupti.cc frees the first internal allocation with FakeCudaInternalFree, and nothing else at that address.
      out.push_back(e);
      addresses.erase(e.address);
    }
  }
  return out;
}

std::vector<LedgerEntry> Without(const std::vector<LedgerEntry>& all, const std::vector<LedgerEntry>& some) {
  std::vector<LedgerEntry> out;
  std::multiset<std::string> drop;
  for (const LedgerEntry& e : some) drop.insert(e.line);
  for (const LedgerEntry& e : all) {
    auto it = drop.find(e.line);
    if (it != drop.end()) {
      drop.erase(it);
    } else {
      out.push_back(e);
    }
  }
  return out;
}

TEST_F(ModesTest, CuptiRecordsWhatInterpositionMissesOnceAndTheRestOnce) {
  const std::string marker = "cupti-loaded";
  const RunResult run = Run("cupti", {{"CUMEMTRACE_CUPTI", "1"}, {"FAKE_CUPTI_MARKER", marker}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  EXPECT_TRUE(std::filesystem::exists(run.dir + "/" + marker)) << "the fake libcupti was not loaded";
  const std::vector<LedgerEntry> ledger = EntriesOfPid(LedgerOf(run), run.pid);
  const std::vector<LedgerEntry> internal = InternalEntries(ledger);
  ASSERT_EQ(internal.size(), 3u) << "cupti.cc makes two internal allocations and one internal free";
  const CollectedTrace trace = Trace(run, run.trace_path);
  EXPECT_TRUE(trace.header.cupti_enabled);
  // Every call exactly once, in the driver's order (single-threaded), on the right thread and device.
  EXPECT_EQ(MultisetDifference(LedgerKeys(ledger, true), EventKeys(trace, true)), "");
  EXPECT_EQ(EventKeys(trace, false), LedgerKeys(ledger, false));
  std::vector<std::string> cupti_only;
  for (const Event& event : trace.events) {
    if (event.cupti_only) cupti_only.push_back(EventKey(trace, event, true));
  }
  EXPECT_EQ(MultisetDifference(LedgerKeys(internal, true), cupti_only), "");
  ASSERT_TRUE(trace.has_trailer);
  EXPECT_EQ(trace.trailer.cupti_only_events, internal.size());
  EXPECT_EQ(CountNotices(trace, NoticeCode::kCuptiOnlyEvent), 1);
  EXPECT_EQ(CountNotices(trace, NoticeCode::kCuptiUnavailable), 0);
  for (const auto& notice : trace.notices) {
    if (notice.code == NoticeCode::kCuptiOnlyEvent) {
      EXPECT_NE(notice.message.find("cuMemAlloc"), std::string::npos) << notice.message;
    }
  }
  EXPECT_TRUE(StderrLines(run, "cumemtrace").empty()) << run.Describe();
}

// Another subscriber holds CUPTI: one stderr line, a notice, and tracing goes on with interposition alone.
TEST_F(ModesTest, CuptiBusyStepsAsideWithOneLineAndANotice) {
  const RunResult run = Run("cupti", {{"CUMEMTRACE_CUPTI", "1"}, {"FAKE_CUPTI_BUSY", "1"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::vector<std::string> lines = StderrLines(run, "cumemtrace");
  ASSERT_EQ(lines.size(), 1u) << run.Describe();
  EXPECT_EQ(lines[0].rfind("cumemtrace: CUPTI", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("MULTIPLE_SUBSCRIBERS"), std::string::npos) << lines[0];
  const std::vector<LedgerEntry> ledger = EntriesOfPid(LedgerOf(run), run.pid);
  const CollectedTrace trace = Trace(run, run.trace_path);
  EXPECT_FALSE(trace.header.cupti_enabled);
  EXPECT_EQ(CountNotices(trace, NoticeCode::kCuptiUnavailable), 1);
  EXPECT_EQ(CountNotices(trace, NoticeCode::kCuptiOnlyEvent), 0);
  EXPECT_EQ(MultisetDifference(LedgerKeys(Without(ledger, InternalEntries(ledger)), true), EventKeys(trace, true)),
            "");
  EXPECT_EQ(trace.trailer.cupti_only_events, 0u);
}

// The program already has a libcupti (libcupti.so.12, from a folder the loader does not search) and subscribed to
// it: cumemtrace uses that library, finds it taken and steps aside. Had it loaded libcupti.so.13 by name (the fake
// on LD_LIBRARY_PATH), that copy's subscription would have succeeded.
TEST_F(ModesTest, CuptiUsesTheLibraryTheProcessAlreadyHas) {
  const std::string own = std::string(E2E_FAKE_CUDA_DIR) + "/cupti12/libcupti.so.12";
  ASSERT_TRUE(std::filesystem::exists(own));
  const RunResult run = Run("cupti", {{"CUMEMTRACE_CUPTI", "1"}, {"E2E_OWN_CUPTI", own}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const CollectedTrace trace = Trace(run, run.trace_path);
  EXPECT_FALSE(trace.header.cupti_enabled);
  EXPECT_EQ(CountNotices(trace, NoticeCode::kCuptiUnavailable), 1);
  EXPECT_EQ(StderrLines(run, "cumemtrace: CUPTI").size(), 1u) << run.Describe();
  const std::vector<LedgerEntry> ledger = EntriesOfPid(LedgerOf(run), run.pid);
  EXPECT_EQ(MultisetDifference(LedgerKeys(Without(ledger, InternalEntries(ledger)), true), EventKeys(trace, true)),
            "");
}

// Off by default: libcupti is never loaded and only interposition's events are in the trace.
TEST_F(ModesTest, CuptiIsNeverLoadedUnlessAsked) {
  const std::string marker = "cupti-loaded";
  const RunResult run = Run("cupti", {{"FAKE_CUPTI_MARKER", marker}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  EXPECT_FALSE(std::filesystem::exists(run.dir + "/" + marker));
  const std::vector<LedgerEntry> ledger = EntriesOfPid(LedgerOf(run), run.pid);
  const CollectedTrace trace = Trace(run, run.trace_path);
  EXPECT_FALSE(trace.header.cupti_enabled);
  for (const analyzer::NoticeInfo& n : trace.notices) {  // a debug-info notice may be there; no CUPTI one
    EXPECT_NE(n.code, format::NoticeCode::kCuptiUnavailable) << n.message;
    EXPECT_NE(n.code, format::NoticeCode::kCuptiOnlyEvent) << n.message;
  }
  EXPECT_EQ(MultisetDifference(LedgerKeys(Without(ledger, InternalEntries(ledger)), true), EventKeys(trace, true)),
            "");
}

// ---- The launcher ----

// scripts/cumemtrace's flags set the documented variables, and the program it starts is the root process even when
// the launcher itself runs under a traced process (an inherited CUMEMTRACE_ROOT_PID is dropped).
TEST(Launcher, FlagsSetTheEnvironmentAndTheProgramIsTheRoot) {
  const std::string command = std::string("CUMEMTRACE_ROOT_PID=1 CUMEMTRACE_LIB=") + E2E_PRELOAD + " " +
                              E2E_LAUNCHER + " --follow-fork --follow-exec --cupti --no-python --sample-ms 7 " +
                              "-o 'x.%r.pb' -- /bin/sh -c 'echo pid=$$; env'";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::map<std::string, std::string> env;
  char line[8192];
  while (fgets(line, sizeof(line), pipe) != nullptr) {
    std::string text(line);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    const size_t eq = text.find('=');
    if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  ASSERT_EQ(pclose(pipe), 0);
  EXPECT_EQ(env["CUMEMTRACE_FOLLOW_FORK"], "1");
  EXPECT_EQ(env["CUMEMTRACE_FOLLOW_EXEC"], "1");
  EXPECT_EQ(env["CUMEMTRACE_CUPTI"], "1");
  EXPECT_EQ(env["CUMEMTRACE_PYTHON"], "0");
  EXPECT_EQ(env["CUMEMTRACE_SAMPLE_MS"], "7");
  EXPECT_EQ(env["CUMEMTRACE_OUTPUT"], "x.%r.pb");
  EXPECT_EQ(env["LD_PRELOAD"].rfind(std::filesystem::canonical(E2E_PRELOAD).string(), 0), 0u) << env["LD_PRELOAD"];
  // The shell loaded the preload first, so it recorded its own pid as the root.
  EXPECT_EQ(env["CUMEMTRACE_ROOT_PID"], env["pid"]);
}

TEST(Launcher, UnknownFlagIsOneLineAndExitCode2) {
  const std::string command = std::string("CUMEMTRACE_LIB=") + E2E_PRELOAD + " " + E2E_LAUNCHER +
                              " --no-such-flag -- /bin/true 2>&1 >/dev/null | head -1";
  FILE* pipe = popen((std::string("sh -c '") + command + "; exit ${PIPESTATUS:-0}'").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char line[1024] = "";
  ASSERT_NE(fgets(line, sizeof(line), pipe), nullptr);
  pclose(pipe);
  EXPECT_EQ(std::string(line).rfind("cumemtrace: unknown option --no-such-flag", 0), 0u) << line;
  const int status = system((std::string("CUMEMTRACE_LIB=") + E2E_PRELOAD + " " + E2E_LAUNCHER +
                             " --no-such-flag -- /bin/true >/dev/null 2>&1").c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
}

// ---- What the program sees, in every mode ----

struct ModeCase {
  const char* name;
  std::vector<std::pair<std::string, std::string>> env;
};

class EveryModeTest : public ModesTest, public testing::WithParamInterface<ModeCase> {};

void PrintTo(const ModeCase& mode, std::ostream* out) { *out << mode.name; }

// errno.cc asserts errno, results and pointers itself and exits 3; the driver sees exactly what it sees untraced,
// and the trace holds exactly the driver's calls.
TEST_P(EveryModeTest, ErrnoResultsAndExitCodeUnchanged) {
  const RunResult traced = Run("errno", GetParam().env);
  EXPECT_EQ(traced.exit_code, 3) << traced.Describe();
  const RunResult plain = Run("errno", GetParam().env, /*preload=*/false);
  EXPECT_EQ(plain.exit_code, 3) << plain.Describe();
  EXPECT_EQ(CanonicalLedger(LedgerOf(traced)), CanonicalLedger(LedgerOf(plain)));
  const CollectedTrace trace = Trace(traced, traced.trace_path);
  EXPECT_EQ(MultisetDifference(LedgerKeys(EntriesOfPid(LedgerOf(traced), traced.pid), true), EventKeys(trace, true)),
            "");
}

const ModeCase kModes[] = {
    {"follow_fork", {{"CUMEMTRACE_FOLLOW_FORK", "1"}}},
    {"follow_exec", {{"CUMEMTRACE_FOLLOW_EXEC", "1"}}},
    {"sample_every_ms", {{"CUMEMTRACE_SAMPLE_MS", "1"}}},
    {"no_samples", {{"CUMEMTRACE_SAMPLE_MS", "0"}}},
    {"cupti", {{"CUMEMTRACE_CUPTI", "1"}}},
    {"cupti_busy", {{"CUMEMTRACE_CUPTI", "1"}, {"FAKE_CUPTI_BUSY", "1"}}},
    {"no_python", {{"CUMEMTRACE_PYTHON", "0"}}},
    {"ranked", {{"RANK", "1"}, {"WORLD_SIZE", "2"}}},
};

INSTANTIATE_TEST_SUITE_P(Modes, EveryModeTest, testing::ValuesIn(kModes),
                         [](const testing::TestParamInfo<ModeCase>& info) { return info.param.name; });

}  // namespace
}  // namespace cumemtrace::e2e
