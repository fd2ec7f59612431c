// End-to-end tests of cumemtrace on the CPU: real programs, the real preload, fake CUDA libraries (tests/fakes).
//
// Each program reaches the driver one way (exported symbols, dlsym, cuGetProcAddress, the shared runtime, the
// runtime's entry points, an embedded static-runtime-like layer, the runtime in an RTLD_LOCAL scope, threads, fork,
// errno); each is run under LD_PRELOAD=libcumemtrace.so and the trace, read back with the analyzer's ReadTrace, is
// compared with the fake driver's ledger, which the fake writes on its own and is the oracle: the same calls (op,
// api, address, size, result), on the same threads, devices and streams, in an order that pairs every free with its
// allocation, with free/total on failures, a stack on every event, a trailer at a clean end. Each program also runs
// without the preload, which must not change its exit status or what the driver saw. Further tests: the pin-memory
// thread's name, fork, SIGKILL after a flush, the configuration (stack depth, an unwritable output), and the reader
// on a trace cut at every byte offset.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/reader/trace_reader.h"
#include "e2e_support.h"
#include "proto/format.h"

namespace cumemtrace::e2e {
namespace {

using analyzer::Event;
using format::Op;
using format::Space;

struct ProgramCase {
  const char* name;
  int exit_code;
  bool multithreaded;  // memory calls from several threads at once: no fixed order, addresses vary between runs
};

void PrintTo(const ProgramCase& program, std::ostream* out) { *out << program.name; }

// The programs in tests/e2e/programs; errno ends with exit code 3 on purpose.
const ProgramCase kPrograms[] = {
    {"direct", 0, false},     {"dlsym", 0, false},          {"getprocaddress", 0, false},
    {"runtime", 0, false},    {"entrypoint", 0, false},     {"static_runtime", 0, false},
    {"threads", 0, true},     {"fork", 0, false},           {"errno", 3, false},
    {"local_runtime", 0, false},
};

// A traced run of one program, with its ledger (the traced process's lines only) and its trace.
class TracedProgramTest : public testing::TestWithParam<ProgramCase> {
 protected:
  void SetUp() override {
    run_ = RunProgram({.program = GetParam().name});
    ASSERT_FALSE(run_.timed_out) << run_.Describe();
    ASSERT_EQ(run_.term_signal, 0) << run_.Describe();
    ASSERT_EQ(run_.exit_code, GetParam().exit_code) << run_.Describe();
    ASSERT_TRUE(ReadLedger(run_.ledger_path, &all_ledger_).ok()) << run_.Describe();
    ledger_ = EntriesOfPid(all_ledger_, run_.pid);
    ASSERT_FALSE(ledger_.empty()) << run_.Describe();
    ASSERT_TRUE(std::filesystem::exists(run_.trace_path)) << "no trace file\n" << run_.Describe();
    trace_ = CollectTrace(run_.trace_path);
    ASSERT_TRUE(trace_.status.ok()) << trace_.status << "\n" << run_.Describe();
  }

  void TearDown() override {
    if (!HasFailure()) RemoveRunDir(run_);
  }

  bool single_threaded() const { return !GetParam().multithreaded; }

  RunResult run_;
  std::vector<LedgerEntry> all_ledger_;
  std::vector<LedgerEntry> ledger_;
  CollectedTrace trace_;
};

TEST_P(TracedProgramTest, TracingChangesNeitherExitStatusNorDriverCalls) {
  const RunResult plain = RunProgram({.program = GetParam().name, .preload = false});
  ASSERT_FALSE(plain.timed_out) << plain.Describe();
  EXPECT_EQ(plain.term_signal, 0) << plain.Describe();
  EXPECT_EQ(plain.exit_code, GetParam().exit_code) << plain.Describe();
  EXPECT_FALSE(std::filesystem::exists(plain.trace_path));
  std::vector<LedgerEntry> plain_ledger;
  ASSERT_TRUE(ReadLedger(plain.ledger_path, &plain_ledger).ok()) << plain.Describe();
  if (single_threaded()) {
    EXPECT_EQ(CanonicalLedger(all_ledger_), CanonicalLedger(plain_ledger));
  } else {
    EXPECT_EQ(UnorderedLedger(all_ledger_), UnorderedLedger(plain_ledger));
  }
  if (!HasFailure()) RemoveRunDir(plain);
}

TEST_P(TracedProgramTest, EventsAreExactlyTheLedgersCalls) {
  EXPECT_EQ(MultisetDifference(LedgerKeys(ledger_, false), EventKeys(trace_, false)), "") << run_.Describe();
}

TEST_P(TracedProgramTest, EventsCarryThreadDeviceStreamAndHandle) {
  EXPECT_EQ(MultisetDifference(LedgerKeys(ledger_, true), EventKeys(trace_, true)), "") << run_.Describe();
}

// Replaying events in delivery (sequence) order, every successful allocation finds its address free and every
// successful free finds it allocated, in each address space; a single-threaded program's events come in exactly
// the order the driver served the calls.
TEST_P(TracedProgramTest, SequenceOrderPairsFreesWithAllocations) {
  std::set<std::pair<Space, uint64_t>> live;
  uint64_t previous_seq = 0;
  int problems = 0;
  for (const Event& event : trace_.events) {
    ASSERT_NE(event.info, nullptr);
    if (&event != &trace_.events.front()) {
      EXPECT_GT(event.seq, previous_seq) << "events not delivered in sequence order";
    }
    previous_seq = event.seq;
    if (event.result != 0) continue;
    const auto key = std::pair{event.info->space, event.address};
    if (event.info->op == Op::kAlloc) {
      if (!live.insert(key).second && ++problems <= 10) {
        ADD_FAILURE() << "seq " << event.seq << ": " << event.info->name << " of " << std::hex << event.address
                      << " while it is still allocated (a reuse ordered before its free)";
      }
    } else if (live.erase(key) == 0 && ++problems <= 10) {
      ADD_FAILURE() << "seq " << event.seq << ": " << event.info->name << " of " << std::hex << event.address
                    << " which is not allocated (a free ordered before its allocation)";
    }
  }
  if (single_threaded()) {
    EXPECT_EQ(EventKeys(trace_, false), LedgerKeys(ledger_, false));
  }
}

TEST_P(TracedProgramTest, FailedAllocationsCarryResultAndFreeTotal) {
  std::multimap<std::string, const Event*> failed_events;
  for (const Event& event : trace_.events) {
    if (event.info != nullptr && event.info->op == Op::kAlloc && event.result != 0) {
      failed_events.emplace(EventKey(trace_, event, false), &event);
    }
  }
  int failures = 0;
  for (const LedgerEntry& entry : ledger_) {
    if (entry.op != "alloc" || entry.result == 0) continue;
    ++failures;
    const std::string key = LedgerKey(entry, false);
    auto it = failed_events.find(key);
    ASSERT_NE(it, failed_events.end()) << "failed allocation missing from the trace: " << entry.line;
    const Event& event = *it->second;
    failed_events.erase(it);
    EXPECT_EQ(event.result, entry.result);
    ASSERT_TRUE(entry.has_mem_info) << entry.line;
    EXPECT_TRUE(event.has_mem_info) << key;
    EXPECT_EQ(event.total_bytes, entry.total_bytes) << key;
    if (single_threaded()) {
      EXPECT_EQ(event.free_bytes, entry.free_bytes) << key;
    } else {
      EXPECT_LE(event.free_bytes, event.total_bytes) << key;
    }
  }
  // Every program plants at least one failure (FAKE_CUDA_FAIL_ABOVE), which is out-of-memory.
  EXPECT_GE(failures, 1) << "the program made no failing allocation: the test would prove nothing";
  EXPECT_TRUE(std::any_of(ledger_.begin(), ledger_.end(), [](const LedgerEntry& e) {
    return e.op == "alloc" && e.result == 2 && e.size > kFakeFailAbove;
  }));
}

// Every allocation (and every failed call) has a stack, and some frame of it lies in the program's own executable
// (the stack reaches the code that made the call, through whichever libraries are in between). Successful frees
// carry none unless CUMEMTRACE_FREE_STACKS=1.
TEST_P(TracedProgramTest, EveryEventHasAStackIntoTheProgram) {
  const std::string program = std::filesystem::canonical(ProgramPath(GetParam().name)).string();
  std::vector<const analyzer::ModuleInfo*> own;
  for (const analyzer::ModuleInfo& module : trace_.modules) {
    std::error_code ignored;
    if (std::filesystem::equivalent(module.path, program, ignored)) own.push_back(&module);
  }
  ASSERT_FALSE(own.empty()) << "no module for " << program << " among " << trace_.modules.size() << " modules";
  int problems = 0;
  for (const Event& event : trace_.events) {
    if (event.info->op == format::Op::kFree && event.result == 0) {
      EXPECT_EQ(event.stack, 0u) << "seq " << event.seq;
      continue;
    }
    std::vector<uint64_t> pcs;
    const absl::Status status = trace_.StackPcs(event.stack, &pcs);
    const bool in_program = std::any_of(pcs.begin(), pcs.end(), [&own](uint64_t pc) {
      return std::any_of(own.begin(), own.end(), [pc](const auto* m) { return pc >= m->start && pc < m->end; });
    });
    if ((!status.ok() || pcs.empty() || !in_program) && ++problems <= 10) {
      ADD_FAILURE() << "seq " << event.seq << " (" << EventKey(trace_, event, false) << "): "
                    << (status.ok() ? (pcs.empty() ? "empty stack" : "no frame in the program")
                                    : std::string(status.message()))
                    << ", " << pcs.size() << " frames";
    }
  }
}

TEST_P(TracedProgramTest, TraceIsCompleteWithHeaderAndTrailer) {
  ASSERT_TRUE(trace_.has_header);
  EXPECT_EQ(trace_.header.format_version, format::kFormatVersion);
  EXPECT_EQ(trace_.header.pid, run_.pid);
  EXPECT_FALSE(trace_.stats.truncated);
  EXPECT_EQ(trace_.stats.unknown_api_events, 0u);
  ASSERT_TRUE(trace_.stats.has_trailer) << "a program that exits normally must leave a trailer";
  ASSERT_TRUE(trace_.has_trailer);
  EXPECT_EQ(trace_.trailer.events, trace_.events.size());
  EXPECT_EQ(trace_.trailer.dropped_events, 0u);
  EXPECT_EQ(trace_.stats.events, trace_.events.size());
}

// Each device that events name is described with what the fake driver reports for it.
TEST_P(TracedProgramTest, DevicesAreDescribedAsTheDriverReportsThem) {
  std::set<int> used;
  for (const Event& event : trace_.events) {
    if (event.device >= 0) used.insert(event.device);
  }
  ASSERT_FALSE(used.empty());
  for (int ordinal : used) {
    auto it = std::find_if(trace_.devices.begin(), trace_.devices.end(),
                           [ordinal](const analyzer::DeviceInfo& d) { return d.ordinal == ordinal; });
    ASSERT_NE(it, trace_.devices.end()) << "no Device packet for device " << ordinal;
    EXPECT_EQ(it->name, "Fake CUDA Device " + std::to_string(ordinal));
    EXPECT_EQ(it->total_memory, kFakeTotalBytes);
    std::string uuid = std::string("FAKECUDA") + std::string(7, '\0') + static_cast<char>(ordinal);
    EXPECT_EQ(it->uuid, uuid);
    EXPECT_EQ(it->driver_version, 13000);
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, TracedProgramTest, testing::ValuesIn(kPrograms),
                         [](const testing::TestParamInfo<ProgramCase>& info) { return info.param.name; });

// The pin-memory thread's name reaches the trace, with its own events.
TEST(E2eThreads, PinThreadNameAndItsEventsAreRecorded) {
  const RunResult run = RunProgram({.program = "threads"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  std::vector<LedgerEntry> ledger;
  ASSERT_TRUE(ReadLedger(run.ledger_path, &ledger).ok());
  std::set<int> pin_tids;  // only the pin thread calls cuMemHostAlloc
  for (const LedgerEntry& e : ledger) {
    if (e.api == "cuMemHostAlloc") pin_tids.insert(e.tid);
  }
  ASSERT_EQ(pin_tids.size(), 1u);
  const CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status << "\n" << run.Describe();
  bool named = false;
  for (const auto& [index, thread] : trace.threads) named |= thread.name == "pt_data_pin";
  EXPECT_TRUE(named) << "no thread named pt_data_pin";
  int pin_events = 0;
  for (const Event& event : trace.events) {
    if (event.api != format::Api::kCuMemHostAlloc) continue;
    ++pin_events;
    auto thread = trace.threads.find(event.thread);
    ASSERT_NE(thread, trace.threads.end()) << "event on thread index " << event.thread << " never described";
    EXPECT_EQ(thread->second.name, "pt_data_pin");
    EXPECT_EQ(thread->second.tid, *pin_tids.begin());
  }
  EXPECT_EQ(pin_events, std::count_if(ledger.begin(), ledger.end(),
                                      [](const LedgerEntry& e) { return e.api == "cuMemHostAlloc"; }));
  // The reuse hand-off happened across threads (so the ordering test above had something to order).
  std::map<uint64_t, std::set<int>> tids_by_address;
  for (const LedgerEntry& e : ledger) {
    if (e.op == "alloc" && e.result == 0 && e.api == "cuMemAlloc_v2") tids_by_address[e.address].insert(e.tid);
  }
  EXPECT_TRUE(std::any_of(tids_by_address.begin(), tids_by_address.end(),
                          [](const auto& entry) { return entry.second.size() > 1; }));
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// A forked child that allocates and _exit()s: the parent's trace holds the parent's events only and ends cleanly;
// a trace the child may have started holds the child's events only.
TEST(E2eFork, ParentTraceHoldsOnlyTheParentsEvents) {
  const RunResult run = RunProgram({.program = "fork"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  std::vector<LedgerEntry> ledger;
  ASSERT_TRUE(ReadLedger(run.ledger_path, &ledger).ok());
  std::set<int> child_pids;
  for (const LedgerEntry& e : ledger) {
    if (e.pid != run.pid) child_pids.insert(e.pid);
  }
  ASSERT_EQ(child_pids.size(), 1u) << "the child made no driver calls";
  const int child = *child_pids.begin();

  const CollectedTrace parent = CollectTrace(run.trace_path);
  ASSERT_TRUE(parent.status.ok()) << parent.status << "\n" << run.Describe();
  EXPECT_FALSE(parent.stats.truncated);
  EXPECT_TRUE(parent.stats.has_trailer);
  EXPECT_EQ(parent.header.pid, run.pid);
  for (const Event& event : parent.events) EXPECT_EQ(parent.Tid(event), run.pid) << EventKey(parent, event, true);
  EXPECT_EQ(MultisetDifference(LedgerKeys(EntriesOfPid(ledger, run.pid), true), EventKeys(parent, true)), "");

  const std::string child_trace = run.dir + "/trace." + std::to_string(child) + ".pb";
  if (std::filesystem::exists(child_trace) && std::filesystem::file_size(child_trace) > 0) {
    const CollectedTrace traced_child = CollectTrace(child_trace);
    ASSERT_TRUE(traced_child.status.ok()) << traced_child.status;
    EXPECT_EQ(traced_child.header.pid, child);
    for (const Event& event : traced_child.events) {
      EXPECT_EQ(traced_child.Tid(event), child) << EventKey(traced_child, event, true);
    }
    std::vector<std::string> child_keys = LedgerKeys(EntriesOfPid(ledger, child), false);
    for (const std::string& key : EventKeys(traced_child, false)) {
      auto it = std::find(child_keys.begin(), child_keys.end(), key);
      EXPECT_NE(it, child_keys.end()) << "child trace holds an event the child did not make: " << key;
      if (it != child_keys.end()) child_keys.erase(it);
    }
  }
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// A process killed with SIGKILL after several flush intervals: nothing at exit ran, yet every event made before the
// last flush is in the trace, which parses (without a trailer).
TEST(E2eKill, SigkilledProgramKeepsEveryEventOlderThanAFlushInterval) {
  const RunResult run = RunProgram({.program = "killed",
                                    .env = {{"CUMEMTRACE_FLUSH_MS", "50"}},
                                    .kill_after_file = "ready",
                                    .kill_delay_ms = 1000});
  ASSERT_EQ(run.term_signal, SIGKILL) << run.Describe();
  std::vector<LedgerEntry> ledger;
  ASSERT_TRUE(ReadLedger(run.ledger_path, &ledger).ok());
  const CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status << "\n" << run.Describe();
  EXPECT_FALSE(trace.stats.has_trailer);
  EXPECT_EQ(MultisetDifference(LedgerKeys(ledger, true), EventKeys(trace, true)), "") << run.Describe();
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// CUMEMTRACE_STACK_DEPTH bounds the recorded frames, and the trace says so.
TEST(E2eConfig, StackDepthBoundsTheRecordedFrames) {
  const RunResult run = RunProgram({.program = "direct", .env = {{"CUMEMTRACE_STACK_DEPTH", "3"}}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status << "\n" << run.Describe();
  EXPECT_EQ(trace.header.stack_depth, 3u);
  ASSERT_FALSE(trace.events.empty());
  for (const Event& event : trace.events) {
    if (event.info->op == Op::kFree && event.result == 0) continue;  // no stack (CUMEMTRACE_FREE_STACKS)
    std::vector<uint64_t> pcs;
    ASSERT_TRUE(trace.StackPcs(event.stack, &pcs).ok()) << EventKey(trace, event, false);
    EXPECT_GE(pcs.size(), 1u);
    EXPECT_LE(pcs.size(), 3u) << EventKey(trace, event, false);
  }
  ASSERT_TRUE(trace.has_trailer);
  EXPECT_GT(trace.trailer.truncated_stacks, 0u) << "main() is more than 3 frames deep: stacks were cut";
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// CUMEMTRACE_UNWIND_MEMO=check: every stack taken from the memo (preload/unwind_memo.h) is unwound as well and
// compared; four threads allocating from their loops take most of their stacks from it, and none differs.
TEST(E2eConfig, RememberedStacksAreTheUnwindersStacks) {
  const RunResult run = RunProgram({.program = "storm",
                                    .env = {{"CUMEMTRACE_UNWIND_MEMO", "check"}},
                                    .args = {"threads", "4", "3000"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  std::ifstream stderr_file(run.dir + "/stderr.txt");
  const std::string err((std::istreambuf_iterator<char>(stderr_file)), std::istreambuf_iterator<char>());
  unsigned long long remembered = 0, taken = 0, unwound = 0, differed = 1;
  const size_t at = err.find("unwind memo check: ");
  ASSERT_NE(at, std::string::npos) << run.Describe();
  ASSERT_EQ(sscanf(err.c_str() + at,
                   "unwind memo check: %llu stacks remembered, %llu taken from the memo, %llu unwound, %llu memo",
                   &remembered, &taken, &unwound, &differed),
            4)
      << err;
  EXPECT_EQ(differed, 0u) << err;
  EXPECT_GT(remembered, 0u);
  EXPECT_GT(taken, 10000u) << err;  // 12000 allocations, from four loops
  EXPECT_GE(taken + unwound, 12000u) << err;
  const CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status << "\n" << run.Describe();
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// Frames whose size their address does not fix (variable-length arrays), sized so that two call paths, one level
// apart, reach the hook at the same stack address while the return addresses the memo checks match: the memo must
// not give one path's stack for the other's (CUMEMTRACE_UNWIND_MEMO=check compares every stack it gives with
// libunwind's), and the trace holds both depths.
TEST(E2eConfig, VariableFramesAreNotTakenForEachOther) {
  const RunResult run = RunProgram({.program = "storm",
                                    .env = {{"CUMEMTRACE_UNWIND_MEMO", "check"}},
                                    .args = {"vla", "200"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  std::ifstream stderr_file(run.dir + "/stderr.txt");
  const std::string err((std::istreambuf_iterator<char>(stderr_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find(" 0 memo stacks differed"), std::string::npos) << err;
  const CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status << "\n" << run.Describe();
  std::map<size_t, int> allocations_by_depth;
  for (const Event& event : trace.events) {
    if (event.info->op != Op::kAlloc || event.stack == 0) continue;
    std::vector<uint64_t> pcs;
    ASSERT_TRUE(trace.StackPcs(event.stack, &pcs).ok());
    ++allocations_by_depth[pcs.size()];
  }
  ASSERT_EQ(allocations_by_depth.size(), 2u) << "the two paths' stacks differ by one frame";
  EXPECT_EQ(allocations_by_depth.begin()->second, 200);
  EXPECT_EQ(allocations_by_depth.rbegin()->first, allocations_by_depth.begin()->first + 1);
  EXPECT_EQ(allocations_by_depth.rbegin()->second, 200);
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// A stack of native frames alone that the unwind memo gives is kept once per batch and named again by the batch's
// later events (recorder.cc, KeepStackLocked): each of four threads allocates 3000 times from one call site, over
// three batches of 8192 events, and every allocation of a thread carries the frames its first one was unwound to.
TEST(E2eConfig, StacksKeptOncePerBatchGiveEveryEventItsOwnFrames) {
  const RunResult run = RunProgram({.program = "storm", .args = {"threads", "4", "3000"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status << "\n" << run.Describe();
  std::map<uint32_t, std::vector<uint64_t>> first_by_thread;
  size_t allocations = 0;
  for (const Event& event : trace.events) {
    if (event.info->op != Op::kAlloc) continue;
    ASSERT_NE(event.stack, 0u);
    std::vector<uint64_t> pcs;
    ASSERT_TRUE(trace.StackPcs(event.stack, &pcs).ok());
    ASSERT_FALSE(pcs.empty());
    auto [first, inserted] = first_by_thread.try_emplace(event.thread, pcs);
    if (!inserted) {
      ASSERT_EQ(pcs, first->second) << "allocation " << allocations << " of thread " << event.thread;
    }
    ++allocations;
  }
  EXPECT_EQ(allocations, 12000u);
  EXPECT_EQ(first_by_thread.size(), 4u);
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// A trace that cannot be written: one warning on stderr, and the program runs as if untraced.
TEST(E2eConfig, UnwritableOutputWarnsOnceAndTheProgramRunsOn) {
  const RunResult run =
      RunProgram({.program = "threads", .env = {{"CUMEMTRACE_OUTPUT", "/nonexistent-cumemtrace-dir/sub/trace.pb"}}});
  EXPECT_EQ(run.exit_code, 0) << run.Describe();
  std::ifstream err(run.dir + "/stderr.txt");
  int warnings = 0;
  for (std::string line; std::getline(err, line);) warnings += line.find("cumemtrace") != std::string::npos;
  EXPECT_EQ(warnings, 1) << run.Describe();
  const RunResult plain = RunProgram({.program = "threads", .preload = false});
  std::vector<LedgerEntry> traced_ledger, plain_ledger;
  ASSERT_TRUE(ReadLedger(run.ledger_path, &traced_ledger).ok());
  ASSERT_TRUE(ReadLedger(plain.ledger_path, &plain_ledger).ok());
  EXPECT_EQ(UnorderedLedger(traced_ledger), UnorderedLedger(plain_ledger));
  if (!testing::Test::HasFailure()) {
    RemoveRunDir(run);
    RemoveRunDir(plain);
  }
}

// Byte offsets at which a whole packet ends (0 included): each packet is field 1 (tag 0x0a) with a varint length.
std::vector<uint64_t> PacketBoundaries(const std::string& bytes) {
  std::vector<uint64_t> boundaries = {0};
  uint64_t pos = 0;
  while (pos < bytes.size()) {
    if (static_cast<uint8_t>(bytes[pos]) != 0x0a) break;
    ++pos;
    uint64_t length = 0;
    for (int shift = 0; pos < bytes.size() && shift < 64; shift += 7) {
      const uint8_t byte = static_cast<uint8_t>(bytes[pos++]);
      length |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) break;
    }
    pos += length;
    if (pos > bytes.size()) break;
    boundaries.push_back(pos);
  }
  return boundaries;
}

class CountingVisitor : public analyzer::TraceVisitor {
 public:
  void OnEvent(const Event&) override { ++events; }
  uint64_t events = 0;
};

// A trace cut at any byte offset (a killed process, a partial copy) reads up to its last whole packet; only an
// empty file is an error.
TEST(E2eTruncation, ReaderSurvivesACutAtEveryOffset) {
  const RunResult run = RunProgram({.program = "threads"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  std::ifstream in(run.trace_path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 0u);
  const std::vector<uint64_t> boundaries = PacketBoundaries(bytes);
  ASSERT_EQ(boundaries.back(), bytes.size()) << "the file is not a sequence of Trace.packet fields";
  const std::set<uint64_t> boundary_set(boundaries.begin(), boundaries.end());
  CountingVisitor full_visitor;
  analyzer::ReadStats full_stats;
  ASSERT_TRUE(analyzer::ReadTrace(run.trace_path, full_visitor, &full_stats).ok());

  // Every offset for a small file; otherwise a stride, plus every packet boundary and its neighbours.
  std::set<uint64_t> offsets;
  const uint64_t stride = std::max<uint64_t>(1, bytes.size() / 20000);
  for (uint64_t offset = 0; offset <= bytes.size(); offset += stride) offsets.insert(offset);
  for (uint64_t b : boundaries) {
    for (uint64_t o : {b - 1, b, b + 1}) {
      if (o <= bytes.size()) offsets.insert(o);
    }
  }
  const std::string cut = run.dir + "/cut.pb";
  {
    std::ofstream out(cut, std::ios::binary);
    out << bytes;
  }
  int problems = 0;
  auto report = [&problems](const std::string& what) {
    if (++problems <= 20) ADD_FAILURE() << what;
  };
  const uint64_t header_end = *boundary_set.upper_bound(0);
  uint64_t events_after = full_visitor.events;
  for (auto it = offsets.rbegin(); it != offsets.rend(); ++it) {  // descending: the file only ever shrinks
    const uint64_t offset = *it;
    ASSERT_EQ(truncate(cut.c_str(), static_cast<off_t>(offset)), 0);
    CountingVisitor visitor;
    analyzer::ReadStats stats;
    const absl::Status status = analyzer::ReadTrace(cut, visitor, &stats);
    const std::string at = "cut at " + std::to_string(offset) + " of " + std::to_string(bytes.size()) + ": ";
    if (offset == 0) {
      if (status.ok() || status.message().find("empty") == std::string::npos) {
        report(at + "expected the 'empty' error, got " + status.ToString());
      }
      continue;
    }
    // Cut inside the header packet: nothing can be analyzed, so the reader must say so (an error naming the
    // header), never crash and never claim an empty analysis.
    if (offset < header_end) {
      if (status.ok() || status.message().find("header") == std::string::npos) {
        report(at + "expected an error about the header, got " + status.ToString());
      }
      continue;
    }
    if (!status.ok()) {
      report(at + status.ToString());
      continue;
    }
    const bool whole = boundary_set.count(offset) > 0;
    if (stats.truncated == whole) report(at + "truncated=" + std::to_string(stats.truncated));
    if (!whole) {
      const uint64_t last_whole = *std::prev(boundary_set.upper_bound(offset));
      if (stats.truncated_at != last_whole) {
        report(at + "truncated_at=" + std::to_string(stats.truncated_at) + ", expected " +
               std::to_string(last_whole));
      }
    }
    if (stats.has_trailer != (offset == bytes.size())) report(at + "has_trailer=" + std::to_string(stats.has_trailer));
    if (visitor.events > events_after) report(at + "more events than in a longer prefix");
    events_after = visitor.events;
  }
  EXPECT_EQ(problems, 0) << problems << " problems; " << offsets.size() << " offsets tried";
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

}  // namespace
}  // namespace cumemtrace::e2e
