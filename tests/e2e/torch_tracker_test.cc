// End-to-end tests of the PyTorch caching-allocator layer (preload/torch_tracker.cc) against the fake
// libc10_cuda.so (tests/fakes/fake_c10_cuda.cc): the tracker attaches at the allocator's first segment, every trace
// entry the allocator emits becomes one TORCH_* event in the trace (the fake's own ledger is the oracle), and every
// case where it cannot attach leaves the program unchanged and says why in one Notice.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/format.h"
#include "tests/e2e/e2e_support.h"

namespace cumemtrace::e2e {
namespace {

using format::Api;

struct TorchEntry {
  std::string action;
  uint64_t address = 0;
  uint64_t size = 0;
  int device = 0;
  int grad = -1;  // ALLOC: autograd's grad mode on the allocating thread (0 or 1)
  long thread = 0;  // the thread that emitted it (its tid)
};

// The fake's ledger: "<action> addr=0x.. size=.. device=N grad=G thread=T" per trace entry it emitted, in order.
std::vector<TorchEntry> ReadTorchLedger(const std::string& path) {
  std::vector<TorchEntry> entries;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    TorchEntry e;
    char action[32] = "";
    unsigned long long address = 0, size = 0;
    if (sscanf(line.c_str(), "%31s addr=0x%llx size=%llu device=%d grad=%d thread=%ld", action, &address, &size,
               &e.device, &e.grad, &e.thread) != 6) {
      ADD_FAILURE() << "bad ledger line: " << line;
      continue;
    }
    e.action = action;
    e.address = address;
    e.size = size;
    entries.push_back(e);
  }
  return entries;
}

std::string ActionOf(Api api) {
  switch (api) {
    case Api::kTorchAlloc: return "alloc(grad unknown)";
    case Api::kTorchAllocGrad: return "alloc(grad)";
    case Api::kTorchAllocNoGrad: return "alloc(no grad)";
    case Api::kTorchFreeRequested: return "free_requested";
    case Api::kTorchFreeCompleted: return "free_completed";
    case Api::kTorchSegmentAlloc: return "segment_alloc";
    case Api::kTorchSegmentFree: return "segment_free";
    case Api::kTorchSegmentMap: return "segment_map";
    case Api::kTorchSegmentUnmap: return "segment_unmap";
    case Api::kTorchOom: return "oom";
    case Api::kTorchFree: return "free";
    default: return "?";
  }
}

// What a trace event must say of a ledger entry: the action, the device, the address (OOM: the free bytes, in aux)
// and, where the api has a size column, the size.
std::string LedgerEntryKey(const TorchEntry& e) {
  std::ostringstream key;
  bool has_size = e.action != "free_requested" && e.action != "free_completed" && e.action != "free";
  key << (e.action != "alloc" ? e.action : e.grad == 1 ? "alloc(grad)" : "alloc(no grad)") << " dev=" << e.device << " addr=0x" << std::hex << e.address << std::dec;
  if (has_size) key << " size=" << e.size;
  return key.str();
}

std::string TraceEventKey(const analyzer::Event& e) {
  std::ostringstream key;
  key << ActionOf(e.api) << " dev=" << e.device << " addr=0x" << std::hex
      << (e.api == Api::kTorchOom ? e.aux : e.address) << std::dec;
  if (e.info->has_size) key << " size=" << e.size;
  return key.str();
}

std::vector<const analyzer::Event*> TorchEvents(const CollectedTrace& trace) {
  std::vector<const analyzer::Event*> events;
  for (const analyzer::Event& e : trace.events) {
    if (format::IsTorchApi(e.api)) events.push_back(&e);
  }
  std::sort(events.begin(), events.end(), [](const auto* a, const auto* b) { return a->seq < b->seq; });
  return events;
}

int NoticesOf(const CollectedTrace& trace, format::NoticeCode code, std::string* message = nullptr) {
  int n = 0;
  for (const analyzer::NoticeInfo& notice : trace.notices) {
    if (notice.code != code) continue;
    ++n;
    if (message != nullptr) *message = notice.message;
  }
  return n;
}

struct TorchRun {
  RunResult run;
  CollectedTrace trace;
  std::vector<TorchEntry> ledger;
};

TorchRun RunTorch(const std::string& scenario, std::vector<std::pair<std::string, std::string>> env = {},
                  bool preload = true) {
  TorchRun r;
  RunOptions options;
  options.program = "torch_alloc";
  options.args = {scenario};
  options.preload = preload;
  options.env = std::move(env);
  options.env.push_back({"FAKE_TORCH_LEDGER", "torch_ledger.txt"});  // relative to the run's folder
  r.run = RunProgram(options);
  r.ledger = ReadTorchLedger(r.run.dir + "/torch_ledger.txt");
  if (preload) r.trace = CollectTrace(r.run.trace_path);
  return r;
}

// Every entry the allocator emitted is in the trace, in the allocator's order: one event each, except that a
// free_requested directly followed by the free_completed of the same block on the same thread is one `free` event.
void ExpectTraceMatchesLedger(const TorchRun& r) {
  std::vector<std::string> expected, actual;
  for (size_t i = 0; i < r.ledger.size(); ++i) {
    const TorchEntry& e = r.ledger[i];
    if (e.action == "free_requested" && i + 1 < r.ledger.size() && r.ledger[i + 1].action == "free_completed" &&
        r.ledger[i + 1].address == e.address && r.ledger[i + 1].device == e.device &&
        r.ledger[i + 1].thread == e.thread) {
      TorchEntry both = e;
      both.action = "free";
      expected.push_back(LedgerEntryKey(both));
      ++i;
      continue;
    }
    expected.push_back(LedgerEntryKey(e));
  }
  for (const analyzer::Event* e : TorchEvents(r.trace)) actual.push_back(TraceEventKey(*e));
  EXPECT_EQ(actual, expected) << r.run.Describe();
  ASSERT_TRUE(r.trace.has_trailer);
  EXPECT_EQ(r.trace.trailer.allocator_events, r.ledger.size());
  EXPECT_EQ(r.trace.trailer.allocator_ignored, 0u);
}

TEST(TorchTracker, AttachesAtTheFirstSegmentAndRecordsEveryEntry) {
  TorchRun r = RunTorch("basic");
  ASSERT_EQ(r.run.exit_code, 0) << r.run.Describe();
  ASSERT_TRUE(r.trace.status.ok()) << r.trace.status;
  ASSERT_GE(r.ledger.size(), 10u);
  ExpectTraceMatchesLedger(r);

  ASSERT_EQ(r.trace.allocator_attaches.size(), 1u);
  const analyzer::AllocatorAttachInfo& attach = r.trace.allocator_attaches[0];
  EXPECT_EQ(attach.devices, 1u);
  EXPECT_TRUE(attach.at_first_segment);
  EXPECT_NE(attach.library.find("libc10_cuda.so"), std::string::npos) << attach.library;
  EXPECT_EQ(NoticesOf(r.trace, format::NoticeCode::kTorchAllocatorUnavailable), 0);
  EXPECT_EQ(NoticesOf(r.trace, format::NoticeCode::kTorchAllocatorIgnored), 0);

  // The attach came right after the driver allocation of the first segment, which orders before its entry; a
  // segment freed orders before the driver's free of it.
  const std::vector<const analyzer::Event*> torch = TorchEvents(r.trace);
  ASSERT_EQ(torch.front()->api, Api::kTorchSegmentAlloc);
  const analyzer::Event* first_segment = nullptr;
  const analyzer::Event* driver_free = nullptr;
  uint64_t segment_free_seq = 0;
  for (const analyzer::Event* e : torch) {
    if (e->api == Api::kTorchSegmentFree && segment_free_seq == 0) segment_free_seq = e->seq;
  }
  for (const analyzer::Event& e : r.trace.events) {
    if (format::IsTorchApi(e.api)) continue;
    if (e.info->op == format::Op::kAlloc && e.address == torch.front()->address && first_segment == nullptr) {
      first_segment = &e;
    }
    if (e.info->op == format::Op::kFree && segment_free_seq != 0 && driver_free == nullptr) driver_free = &e;
  }
  ASSERT_NE(first_segment, nullptr);
  EXPECT_EQ(attach.after_seq, first_segment->seq);
  EXPECT_LT(first_segment->seq, torch.front()->seq);
  ASSERT_NE(driver_free, nullptr);
  EXPECT_LT(segment_free_seq, driver_free->seq);

  // A block handed out carries the stack that asked for it (the program's main), and so does a segment given back
  // (who released it: empty_cache() or a request); the other entries carry none.
  for (const analyzer::Event* e : torch) {
    if (format::IsTorchBlockAlloc(e->api) || e->api == Api::kTorchSegmentFree) {
      EXPECT_NE(e->stack, 0u) << TraceEventKey(*e);
    } else {
      EXPECT_EQ(e->stack, 0u) << TraceEventKey(*e);
    }
  }
  RemoveRunDir(r.run);
}

// A free PyTorch completes later (a block used on other streams) is two rows, except where nothing came between the
// request and its completion on that thread; the ledger says which.
TEST(TorchTracker, AFreeCompletedLaterIsARowOfItsOwn) {
  TorchRun r = RunTorch("deferred");
  ASSERT_EQ(r.run.exit_code, 0) << r.run.Describe();
  ASSERT_TRUE(r.trace.status.ok()) << r.trace.status;
  ExpectTraceMatchesLedger(r);
  int completed = 0, merged = 0;
  for (const analyzer::Event* e : TorchEvents(r.trace)) {
    completed += e->api == Api::kTorchFreeCompleted ? 1 : 0;
    merged += e->api == Api::kTorchFree ? 1 : 0;
  }
  EXPECT_EQ(completed, 2);  // a's, after another row, and d's, on another thread
  EXPECT_EQ(merged, 7);     // c's, right after its request; e's and b's, never deferred; basic's four
  RemoveRunDir(r.run);
}

// A completion may become its request's torch.free row only if no sequence number was taken in between: here
// another thread's cuMemFree took one (and is held inside the fake driver) after the request's row was written, so
// the completion is a row of its own, numbered after that free; folding it into the request would put it first.
TEST(TorchTracker, ACompletionAfterAnotherThreadsNumberIsARowOfItsOwn) {
  TorchRun r = RunTorch("held");
  ASSERT_EQ(r.run.exit_code, 0) << r.run.Describe();
  ASSERT_TRUE(r.trace.status.ok()) << r.trace.status;
  const analyzer::Event* requested = nullptr;
  const analyzer::Event* completed = nullptr;
  const analyzer::Event* driver_free = nullptr;
  for (const analyzer::Event& e : r.trace.events) {
    if (e.api == Api::kTorchFreeRequested && requested == nullptr) requested = &e;
    if (e.api == Api::kTorchFreeCompleted && completed == nullptr) completed = &e;
    if (e.api == Api::kCuMemFree && driver_free == nullptr && requested != nullptr) driver_free = &e;
  }
  ASSERT_NE(requested, nullptr);
  ASSERT_NE(completed, nullptr) << "the completion was folded into its request";
  ASSERT_NE(driver_free, nullptr);
  EXPECT_EQ(completed->address, requested->address);
  EXPECT_LT(requested->seq, driver_free->seq);
  EXPECT_LT(driver_free->seq, completed->seq);
  RemoveRunDir(r.run);
}

// A signal handler's CUDA calls may come while its thread holds the recorder's lock (recording one of the
// allocator's entries, or folding a completed free into its request): they are then not recorded, and nothing waits
// for that lock for ever. Every entry of the allocator is still in the trace (the fake's counts are the oracle).
TEST(TorchTracker, ASignalHandlersCudaCallsNeverWaitForTheLockTheirThreadHolds) {
  RunOptions options;
  options.program = "torch_alloc";
  options.args = {"signals"};
  // No driver memory samples: the thread's own driver calls (and the fake driver's mutex) are not the subject.
  options.env = {{"CUMEMTRACE_SAMPLE_MS", "0"}, {"FAKE_TORCH_COUNTS", "torch_counts.txt"}};
  options.timeout_s = 90;  // the program stops by itself within 30 s
  RunResult run = RunProgram(options);
  ASSERT_FALSE(run.timed_out) << "a handler's call waited for a lock its thread held\n" << run.Describe();
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  std::map<std::string, uint64_t> made;  // entries the fake allocator emitted, per action
  std::ifstream counts(run.dir + "/torch_counts.txt");
  std::string action;
  uint64_t count = 0;
  while (counts >> action >> count) made[action] = count;
  ASSERT_GE(made["alloc"], 20000u) << run.Describe();  // torch_alloc.cc's kMinBlocks: the loop ran
  uint64_t entries = 0;
  for (const auto& [name, n] : made) entries += name == "snapshot" ? 0 : n;
  ASSERT_TRUE(trace.has_trailer);
  EXPECT_EQ(trace.trailer.allocator_events, entries);
  uint64_t blocks = 0;
  for (const analyzer::Event* e : TorchEvents(trace)) blocks += format::IsTorchBlockAlloc(e->api) ? 1 : 0;
  EXPECT_EQ(blocks, made["alloc"]);
  // The handler's allocations (4 KiB; the allocator's segment is larger): those the driver made, and those traced.
  std::vector<LedgerEntry> ledger;
  ASSERT_TRUE(ReadLedger(run.ledger_path, &ledger).ok());
  size_t handled = 0, traced = 0;
  for (const LedgerEntry& e : ledger) handled += e.op == "alloc" && e.size == 4096 && e.result == 0 ? 1 : 0;
  for (const analyzer::Event& e : trace.events) traced += e.api == Api::kCuMemAlloc && e.size == 4096 ? 1 : 0;
  EXPECT_GE(handled, 1000u) << "the program gave up after 30 s with too few signals handled to test anything";
  EXPECT_LE(traced, handled);
  RemoveRunDir(run);
}

// Each block says whether autograd was recording on the thread that asked for it, as libc10's GradMode answered
// there (the ledger's grad=, compared block by block by ExpectTraceMatchesLedger); never "unknown" when it can ask.
TEST(TorchTracker, EachBlockCarriesAutogradsGradMode) {
  TorchRun r = RunTorch("basic");
  ASSERT_EQ(r.run.exit_code, 0) << r.run.Describe();
  ASSERT_TRUE(r.trace.status.ok()) << r.trace.status;
  ExpectTraceMatchesLedger(r);
  int recording = 0, not_recording = 0;
  for (const analyzer::Event* e : TorchEvents(r.trace)) {
    EXPECT_NE(e->api, Api::kTorchAlloc) << TraceEventKey(*e);
    recording += e->api == Api::kTorchAllocGrad;
    not_recording += e->api == Api::kTorchAllocNoGrad;
  }
  EXPECT_EQ(recording, 4);
  EXPECT_EQ(not_recording, 1);
  EXPECT_EQ(NoticesOf(r.trace, format::NoticeCode::kGradModeUnknown), 0);
  RemoveRunDir(r.run);
}

// With stacks off the tracker still attaches: the recorder takes a short native stack of the driver's allocations
// only to see PyTorch's allocator ask (blocks then carry no stack).
TEST(TorchTracker, AttachesWithStacksOff) {
  TorchRun r = RunTorch("basic", {{"CUMEMTRACE_STACK_DEPTH", "0"}});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.Describe();
  ASSERT_TRUE(r.trace.status.ok()) << r.trace.status;
  ExpectTraceMatchesLedger(r);
  EXPECT_EQ(r.trace.allocator_attaches.size(), 1u);
  for (const analyzer::Event& e : r.trace.events) EXPECT_EQ(e.stack, 0u) << TraceEventKey(e);
  RemoveRunDir(r.run);
}

TEST(TorchTracker, TheProgramRunsAsItDoesUntraced) {
  TorchRun traced = RunTorch("basic");
  TorchRun untraced = RunTorch("basic", {}, /*preload=*/false);
  EXPECT_EQ(traced.run.exit_code, 0) << traced.run.Describe();
  EXPECT_EQ(untraced.run.exit_code, 0) << untraced.run.Describe();
  ASSERT_EQ(traced.ledger.size(), untraced.ledger.size());
  for (size_t i = 0; i < traced.ledger.size(); ++i) {
    EXPECT_EQ(traced.ledger[i].action, untraced.ledger[i].action) << i;
    EXPECT_EQ(traced.ledger[i].size, untraced.ledger[i].size) << i;
  }
  RemoveRunDir(traced.run);
  RemoveRunDir(untraced.run);
}

TEST(TorchTracker, TriesAgainWhenTheAllocatorDoesNotExistYet) {
  TorchRun r = RunTorch("retry");
  ASSERT_EQ(r.run.exit_code, 0) << r.run.Describe();
  ExpectTraceMatchesLedger(r);
  ASSERT_EQ(r.trace.allocator_attaches.size(), 1u);
  EXPECT_EQ(r.trace.allocator_attaches[0].devices, 1u);
  EXPECT_FALSE(r.trace.allocator_attaches[0].at_first_segment);  // an attempt came before: say so, conservatively
  RemoveRunDir(r.run);
}

TEST(TorchTracker, EveryDeviceAllocatorGetsTheTracker) {
  TorchRun r = RunTorch("devices", {{"FAKE_CUDA_DEVICE_COUNT", "2"}});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.Describe();
  ExpectTraceMatchesLedger(r);
  ASSERT_EQ(r.trace.allocator_attaches.size(), 1u);
  EXPECT_EQ(r.trace.allocator_attaches[0].devices, 2u);
  bool device1 = false;
  for (const analyzer::Event* e : TorchEvents(r.trace)) device1 |= e->device == 1;
  EXPECT_TRUE(device1);
  RemoveRunDir(r.run);
}

TEST(TorchTracker, ExpandableSegmentsAttachAtTheAddressReservation) {
  TorchRun r = RunTorch("basic", {{"FAKE_TORCH_EXPANDABLE", "1"}, {"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.Describe();
  ExpectTraceMatchesLedger(r);
  ASSERT_EQ(r.trace.allocator_attaches.size(), 1u);
  EXPECT_TRUE(r.trace.allocator_attaches[0].at_first_segment);
  EXPECT_EQ(r.trace.allocator_attaches[0].config, "expandable_segments:True");
  ASSERT_FALSE(TorchEvents(r.trace).empty());
  EXPECT_EQ(TorchEvents(r.trace).front()->api, Api::kTorchSegmentMap);
  RemoveRunDir(r.run);
}

TEST(TorchTracker, AnOomEntryCarriesTheRequestTheFreeBytesAndAStack) {
  TorchRun r = RunTorch("oom");
  ASSERT_EQ(r.run.exit_code, 0) << r.run.Describe();
  ExpectTraceMatchesLedger(r);
  const analyzer::Event* oom = nullptr;
  for (const analyzer::Event* e : TorchEvents(r.trace)) {
    if (e->api == Api::kTorchOom) oom = e;
  }
  ASSERT_NE(oom, nullptr);
  EXPECT_EQ(oom->size, r.ledger.back().size);
  EXPECT_EQ(oom->aux, r.ledger.back().address);
  EXPECT_NE(oom->stack, 0u);
  RemoveRunDir(r.run);
}

// Each way of not attaching: the program is unchanged, the trace has no block layer and one Notice says why.
void ExpectStepsAside(const TorchRun& r, format::NoticeCode code, const std::string& reason) {
  EXPECT_EQ(r.run.exit_code, 0) << r.run.Describe();
  ASSERT_TRUE(r.trace.status.ok()) << r.trace.status;
  EXPECT_TRUE(TorchEvents(r.trace).empty());
  std::string message;
  EXPECT_EQ(NoticesOf(r.trace, code, &message), 1) << r.run.Describe();
  EXPECT_NE(message.find(reason), std::string::npos) << message;
  ASSERT_TRUE(r.trace.has_trailer);
  EXPECT_EQ(r.trace.trailer.allocator_events, 0u);
}

TEST(TorchTracker, StepsAsideForTheCudaMallocAsyncBackend) {
  TorchRun r = RunTorch("basic", {{"FAKE_TORCH_BACKEND", "async"}});
  ExpectStepsAside(r, format::NoticeCode::kTorchAllocatorUnavailable, "cudaMallocAsync");
  EXPECT_TRUE(r.trace.allocator_attaches.empty());
  RemoveRunDir(r.run);
}

TEST(TorchTracker, StepsAsideForAStrippedLibrary) {
  TorchRun r = RunTorch("basic", {{"LD_LIBRARY_PATH", std::string(E2E_FAKE_CUDA_DIR) + "/torch_stripped:" +
                                                          E2E_FAKE_CUDA_DIR}});
  ExpectStepsAside(r, format::NoticeCode::kTorchAllocatorUnavailable, "stripped");
  EXPECT_TRUE(r.trace.allocator_attaches.empty());
  RemoveRunDir(r.run);
}

TEST(TorchTracker, StepsAsideWhenCachingIsOff) {
  TorchRun r = RunTorch("basic", {{"PYTORCH_NO_CUDA_MEMORY_CACHING", "1"}});
  ExpectStepsAside(r, format::NoticeCode::kTorchAllocatorUnavailable, "PYTORCH_NO_CUDA_MEMORY_CACHING");
  RemoveRunDir(r.run);
}

TEST(TorchTracker, IgnoresEveryEntryWhenTheFirstDoesNotDescribeTheSegment) {
  TorchRun r = RunTorch("basic", {{"FAKE_TORCH_BAD_LAYOUT", "1"}});
  ExpectStepsAside(r, format::NoticeCode::kTorchAllocatorIgnored, "layout");
  EXPECT_EQ(r.trace.trailer.allocator_ignored, r.ledger.size());
  RemoveRunDir(r.run);
}

TEST(TorchTracker, StepsAsideWhenTurnedOff) {
  TorchRun r = RunTorch("basic", {{"CUMEMTRACE_TORCH_BLOCKS", "0"}});
  ExpectStepsAside(r, format::NoticeCode::kTorchAllocatorUnavailable, "CUMEMTRACE_TORCH_BLOCKS=0");
  EXPECT_TRUE(r.trace.allocator_attaches.empty());
  RemoveRunDir(r.run);
}

TEST(TorchTracker, SaysSoWhenTheProcessHasNoPyTorch) {
  RunOptions options;
  options.program = "direct";
  RunResult run = RunProgram(options);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  CollectedTrace trace = CollectTrace(run.trace_path);
  std::string message;
  EXPECT_EQ(NoticesOf(trace, format::NoticeCode::kTorchAllocatorUnavailable, &message), 1);
  EXPECT_NE(message.find("no PyTorch"), std::string::npos) << message;
  RemoveRunDir(run);
}

}  // namespace
}  // namespace cumemtrace::e2e
