// Phases in the model (analyzer/model/usage/phases.cc) on a built trace with exact numbers: ranges on two threads placed
// among the events by after_seq (all Phase packets come before the events in the file, as the preload may write
// them), the peak per phase counting what was live when it opened, start/end ranges across threads, the phase of
// an OOM and of each leak, and --phase / --window narrowing the peaks, OOMs and leaks; plus the command line.
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "analyzer/commands/command_line.h"
#include "analyzer/model/analysis.h"
#include "analyzer/model/memory/history.h"
#include "gtest/gtest.h"
#include "proto/perfetto_trace.pb.h"
#include "proto/trace.pb.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer {
namespace {

using test::Alloc;
using test::Free;
using test::kStartNs;
using test::TraceBuilder;

format::Packet Phase(format::Phase::Kind kind, uint32_t thread, uint64_t after_seq, const std::string& name = "",
                     uint64_t range_id = 0, double t_ms = 0) {
  format::Packet p;
  format::Phase* ph = p.mutable_phase();
  ph->set_kind(kind);
  ph->set_thread(thread);
  ph->set_after_seq(after_seq);
  ph->set_name(name);
  ph->set_range_id(range_id);
  ph->set_time_ns(kStartNs + static_cast<int64_t>(t_ms * 1e6));
  return p;
}

// a (thread 1): X 100, Y 50 | b (thread 2) opens with 150 live: free X, Z 30 | pop b | W 500 | pop a | free W |
// c (start on thread 2, end on thread 1): V 10, a failed request.
std::string BuildTrace() {
  TraceBuilder b;
  b.Header().Device(0, "GPU", 1ull << 30).Thread(1, 100, "main").Thread(2, 101, "loader");
  const uint64_t sy = b.Stack({0x1002}), sz = b.Stack({0x1003}), sv = b.Stack({0x1004});
  b.Packet(Phase(format::Phase::PUSH, 1, 0, "a", 0, 0));
  b.Packet(Phase(format::Phase::PUSH, 2, 2, "b", 0, 2.5));
  b.Packet(Phase(format::Phase::POP, 2, 4, "", 0, 4.5));
  b.Packet(Phase(format::Phase::POP, 1, 5, "", 0, 5.5));
  b.Packet(Phase(format::Phase::START, 2, 6, "c", 77, 6.5));
  b.Packet(Phase(format::Phase::MARK, 2, 6, "m", 0, 6.5));
  b.Packet(Phase(format::Phase::END, 1, 8, "", 77, 8.5));
  test::Ev failed = Alloc(8, 8, 0x9000, 1 << 20, 0, format::Api::kCudaMalloc, 0, 1);
  failed.result = 2;
  b.Events({Alloc(1, 1, 0x1000, 100, 0, format::Api::kCudaMalloc, 0, 1),
            Alloc(2, 2, 0x2000, 50, sy, format::Api::kCudaMalloc, 0, 1),
            Free(3, 3, 0x1000, format::Api::kCudaFree, 0, 2),
            Alloc(4, 4, 0x3000, 30, sz, format::Api::kCudaMalloc, 0, 2),
            Alloc(5, 5, 0x4000, 500, 0, format::Api::kCudaMalloc, 0, 1),
            Free(6, 6, 0x4000, format::Api::kCudaFree, 0, 1),
            Alloc(7, 7, 0x5000, 10, sv, format::Api::kCudaMalloc, 0, 2), failed});
  b.Trailer(8, kStartNs + 10'000'000);
  return b.Write("phases.pb");
}

uint64_t TotalPeak(const Analysis& a) {
  const PeakResult* p = a.FindPeak(0, kDeviceTotalSeries);
  return p == nullptr ? 0 : p->counter.peak_bytes;
}

TEST(Phases, PeakPerPhaseAndThePhaseOfEachOomAndLeak) {
  auto a = Analyze(BuildTrace(), AnalyzeOptions());
  ASSERT_TRUE(a.ok()) << a.status();
  const PhaseResults& r = (*a)->phases;
  std::map<std::string, uint64_t> peaks;
  for (const PhaseSummary& s : r.phases) {
    for (const PhasePeak& p : s.peaks) {
      if (p.series == kDeviceTotalSeries) peaks[s.name] = p.peak_bytes;
    }
  }
  EXPECT_EQ(peaks, (std::map<std::string, uint64_t>{{"a", 580}, {"b", 150}, {"c", 90}}));
  ASSERT_EQ(r.ranges.size(), 3u);
  EXPECT_EQ(r.ranges[1].name, "b");
  EXPECT_EQ(r.ranges[1].begin_seq, 2u);
  EXPECT_EQ(r.ranges[1].end_seq, 4u);
  EXPECT_TRUE(r.ranges[2].closed);
  EXPECT_EQ(r.marks, 1u);
  EXPECT_EQ(r.unmatched_closes, 0u);
  EXPECT_EQ(TotalPeak(**a), 580u);
  ASSERT_EQ((*a)->ooms.size(), 1u);
  EXPECT_EQ((*a)->ooms[0].phase, "c");  // thread 1 has nothing open: the range open anywhere
  std::map<uint64_t, std::string> leak_phase;
  for (const LeakGroup& g : (*a)->leaks) leak_phase[g.bytes] = g.phase;
  EXPECT_EQ(leak_phase, (std::map<uint64_t, std::string>{{50, "a"}, {30, "b"}, {10, "c"}}));
}

TEST(Phases, FilterNarrowsPeaksOomsAndLeaks) {
  const std::string path = BuildTrace();
  AnalyzeOptions options;
  options.phase_filter.phase = "b";
  auto b = Analyze(path, options);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(TotalPeak(**b), 150u);  // live when b opened; X 100 was freed inside it
  EXPECT_EQ((*b)->FindPeak(0, kDeviceTotalSeries)->counter.peak.seq, 2u);
  EXPECT_TRUE((*b)->ooms.empty());
  ASSERT_EQ((*b)->leaks.size(), 1u);
  EXPECT_EQ((*b)->leaks[0].bytes, 30u);
  EXPECT_EQ((*b)->phases.filter_events, 2u);
  // Live at b's peak: X and Y (both allocated before b opened), exactly.
  const PeakResult* p = (*b)->FindPeak(0, kDeviceTotalSeries);
  EXPECT_TRUE(p->at_peak.taken);
  EXPECT_EQ(p->at_peak.total_bytes, 150u);
  EXPECT_EQ(p->at_peak.total_count, 2u);

  options.phase_filter.phase = "c";
  auto c = Analyze(path, options);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(TotalPeak(**c), 90u);
  EXPECT_EQ((*c)->ooms.size(), 1u);

  options.phase_filter = PhaseFilter();
  options.phase_filter.has_window = true;  // events at 5 ms and 6 ms: W allocated, then freed
  options.phase_filter.window_start_ms = 5;
  options.phase_filter.window_end_ms = 7;
  auto w = Analyze(path, options);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(TotalPeak(**w), 580u);
  EXPECT_EQ((*w)->phases.filter_events, 2u);
  EXPECT_TRUE((*w)->leaks.empty());
}

// PyTorch's reserved bytes per phase, from the torch.* segment events: what max_memory_reserved() reports after a
// reset at the phase's start (the segment reserved before it counts, the one freed inside it stays in the peak).
TEST(Phases, TorchReservedPerPhase) {
  TraceBuilder b;
  b.Header().Device(0, "GPU", 1ull << 30).Thread(1, 100, "main");
  b.Packet(Phase(format::Phase::PUSH, 1, 2, "train"));
  b.Packet(Phase(format::Phase::POP, 1, 6));
  auto ev = [](uint64_t seq, format::Api api, uint64_t address, uint64_t size) {
    test::Ev e = Alloc(seq, static_cast<double>(seq), address, size, 0, api, 0, 1);
    return e;
  };
  b.Events({ev(1, format::Api::kCuMemAlloc, 0x1000, 2 << 20), ev(2, format::Api::kTorchSegmentAlloc, 0x1000, 2 << 20),
            ev(3, format::Api::kCuMemAlloc, 0x400000, 8 << 20),
            ev(4, format::Api::kTorchSegmentAlloc, 0x400000, 8 << 20),
            ev(5, format::Api::kTorchSegmentFree, 0x400000, 8 << 20), Free(6, 6, 0x400000, format::Api::kCuMemFree),
            ev(7, format::Api::kCuMemAlloc, 0x2000000, 20 << 20),
            ev(8, format::Api::kTorchSegmentAlloc, 0x2000000, 20 << 20)});
  b.Trailer(8, kStartNs + 10'000'000);
  auto a = Analyze(b.Write("torch_phases.pb"), AnalyzeOptions());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ((*a)->phases.phases.size(), 1u);
  uint64_t reserved = 0;
  for (const PhasePeak& p : (*a)->phases.phases[0].peaks) {
    if (p.series == kTorchReservedSeries) reserved = p.peak_bytes;
  }
  EXPECT_EQ(reserved, 10u << 20);
  EXPECT_STREQ(PhaseSeriesName(kTorchReservedSeries), "torch_reserved");
}

// The first Phase packet may reach the model after events it follows: the preload writes a range opened after a
// batch was sealed behind that batch, and the reader hands a marked batch's events on as soon as they are complete.
// What those events left (PyTorch's reserved segment, a live tensor) counts in the phase that opens after them, as
// max_memory_reserved() and max_memory_allocated() after a reset at the phase's start do. The first batch is longer
// than the reader's chunk of 256, so it reaches the model before the phase whatever the reader holds back.
TEST(Phases, WhatEventsBeforeTheFirstPhaseLeftCountsInIt) {
  constexpr uint64_t kBefore = 600;  // rows before the phase: a segment, a tensor, then plain allocations and frees
  TraceBuilder b;
  b.Header().Device(0, "GPU", 1ull << 30).Thread(1, 100, "main");
  std::vector<test::Ev> first = {Alloc(1, 1, 0x1000000, 2 << 20, 0, format::Api::kCuMemAlloc, 0, 1),
                                 test::Torch(2, 1, format::Api::kTorchSegmentAlloc, 0x1000000, 2 << 20),
                                 test::Torch(3, 1, format::Api::kTorchAlloc, 0x1000000, 1 << 20)};
  for (uint64_t seq = 4; seq <= kBefore; seq += 2) {
    first.push_back(Alloc(seq, 2, 0x9000000, 4096, 0, format::Api::kCudaMalloc, 0, 1));
    first.push_back(Free(seq + 1, 2, 0x9000000, format::Api::kCudaFree, 0, 1));
  }
  format::EventBatch marked = TraceBuilder::Encode(first);
  marked.set_complete_below(kBefore + 1);
  b.Batch(marked);
  b.Packet(Phase(format::Phase::PUSH, 1, kBefore, "train", 0, 3));
  const uint64_t s = kBefore;
  format::EventBatch second = TraceBuilder::Encode(
      {Alloc(s + 1, 4, 0x4000000, 8 << 20, 0, format::Api::kCuMemAlloc, 0, 1),
       test::Torch(s + 2, 4, format::Api::kTorchSegmentAlloc, 0x4000000, 8 << 20),
       test::Torch(s + 3, 4, format::Api::kTorchFree, 0x1000000),
       test::Torch(s + 4, 5, format::Api::kTorchSegmentFree, 0x4000000, 8 << 20),
       Free(s + 5, 5, 0x4000000, format::Api::kCuMemFree, 0, 1)});
  second.set_complete_below(s + 6);
  b.Batch(second);
  b.Packet(Phase(format::Phase::POP, 1, s + 5, "", 0, 6));
  b.Trailer(s + 5, kStartNs + 10'000'000);
  auto a = Analyze(b.Write("phase_after_events.pb"), AnalyzeOptions());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ((*a)->phases.phases.size(), 1u);
  std::map<int, uint64_t> peak;
  for (const PhasePeak& p : (*a)->phases.phases[0].peaks) peak[p.series] = p.peak_bytes;
  EXPECT_EQ(peak[kTorchReservedSeries], 10u << 20);  // the 2 MiB segment from before, and the 8 MiB one inside
  EXPECT_EQ(peak[kTorchAllocatedSeries], 1u << 20);   // the tensor live when the phase opened, freed inside it
  EXPECT_EQ(peak[kDeviceTotalSeries], 10u << 20);
}

TEST(Phases, PerfettoHasASlicePerRange) {
  const std::string out = ::testing::TempDir() + "/phases.perfetto-trace";
  std::remove(out.c_str());
  const test::ToolResult r = test::Tool({"perfetto", BuildTrace(), "-o", out});
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(out, std::ios::binary);
  perfetto::Trace t;
  ASSERT_TRUE(t.ParseFromIstream(&in));
  std::map<std::string, int> begins;
  int ends = 0;
  for (const auto& p : t.packet()) {
    if (!p.has_track_event()) continue;
    if (p.track_event().type() == perfetto::TrackEvent::TYPE_SLICE_BEGIN) ++begins[p.track_event().name()];
    if (p.track_event().type() == perfetto::TrackEvent::TYPE_SLICE_END) ++ends;
  }
  EXPECT_EQ(begins, (std::map<std::string, int>{{"a", 1}, {"b", 1}, {"c", 1}}));
  EXPECT_EQ(ends, 3);
}

// A damaged clock whose times span all of int64: the header starts at INT64_MIN, a range opens there and closes at
// INT64_MAX with allocations in it at INT64_MAX, the trailer ends at INT64_MAX. Durations saturate at INT64_MAX
// instead of overflowing (the fuzz target's UBSan found the history's moment times; tests/fuzz/regressions/ has
// inputs like this one), and the reports and exports still succeed.
TEST(Phases, ClockSpanningAllOfInt64) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  TraceBuilder b;
  format::Header h = TraceBuilder::DefaultHeader();
  h.set_start_time_ns(kMin);
  b.Header(h).Device(0, "GPU", 1ull << 30).Thread(1, 100, "main");
  format::Packet push = Phase(format::Phase::PUSH, 1, 0, "a");
  push.mutable_phase()->set_time_ns(kMin);
  format::Packet pop = Phase(format::Phase::POP, 1, 1);
  pop.mutable_phase()->set_time_ns(kMax);
  b.Packet(push).Packet(pop);
  test::Ev pinned = Alloc(1, 0, 0x2000, 64, 0, format::Api::kCudaHostAlloc, -1, 1);
  pinned.time_ns = kMax;
  test::Ev device = Alloc(2, 0, 0x1000, 100, 0, format::Api::kCudaMalloc, 0, 1);
  device.time_ns = kMax;
  test::Ev brief = Alloc(3, 0, 0x3000, 50, 0, format::Api::kCudaMalloc, 0, 1);  // the last bucket's max is not its last
  brief.time_ns = kMax;
  test::Ev freed = Free(4, 0, 0x3000, format::Api::kCudaFree, 0, 1);
  freed.time_ns = kMax;
  test::Ev segment = test::Torch(5, 0, format::Api::kTorchSegmentAlloc, 0x1000, 100);  // for torch-snapshot's times
  segment.time_ns = kMax;
  b.Events({pinned, device, brief, freed, segment});
  b.Trailer(5, kMax);
  const std::string path = b.Write("int64_clock.pb");

  auto a = Analyze(path, AnalyzeOptions());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->info.DurationNs(), kMax);
  ASSERT_EQ((*a)->phases.phases.size(), 1u);
  EXPECT_EQ((*a)->phases.phases[0].total_ns, kMax);
  ASSERT_EQ((*a)->pinned.windows.size(), 201u);  // kMax / 200 wide: the last one ends past int64
  EXPECT_EQ((*a)->pinned.windows[199].end_ns, (*a)->pinned.windows[200].start_ns);
  EXPECT_EQ((*a)->pinned.windows[200].end_ns, kMax);

  HistoryOptions options;
  absl::StatusOr<History> history = ReadHistory(**a, options);
  ASSERT_TRUE(history.ok()) << history.status();
  EXPECT_EQ(history->bucket_ns, kMax / options.buckets + 1);  // rounded up
  ASSERT_EQ(history->moments.size(), static_cast<size_t>(options.moments));
  for (int j = 0; j < options.moments; ++j) {  // kMax * j / 47, exactly
    const __int128 exact = static_cast<__int128>(kMax) * j / (options.moments - 1);
    EXPECT_EQ(history->moments[j].time_ns, static_cast<int64_t>(exact)) << j;
  }

  test::JsonValue summary = test::Json(test::Tool({"summary", path, "--json"}));
  ASSERT_TRUE(summary.has("phases"));
  EXPECT_EQ(summary["phases"][0]["total_ns"].integer(), kMax);
  EXPECT_EQ(summary["phases"][0]["first_ns"].integer(), 0);
  EXPECT_EQ(summary["phase_ranges"][0]["end_ns"].integer(), kMax);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"summary", path}, {"peak", path, "--json"}, {"pinned", path, "--json"},
           {"html", path, "-o", path + ".html"}, {"perfetto", path, "-o", path + ".perfetto"},
           {"torch-snapshot", path, "-o", path + ".pickle"},
           {"torch-snapshot", path, "--json", "-o", path + ".json"}, {"leaks", path, "--window", "0:1000"}}) {
    const test::ToolResult r = test::Tool(args);
    EXPECT_EQ(r.code, 0) << args[0] << ": " << r.err;
  }
}

TEST(Phases, CommandLine) {
  auto cl = ParseCommandLine({"peak", "t.pb", "--phase", "validate"});
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(cl->phase_filter.phase, "validate");
  cl = ParseCommandLine({"leaks", "t.pb", "--window=100:2500"});
  ASSERT_TRUE(cl.ok());
  EXPECT_TRUE(cl->phase_filter.has_window);
  EXPECT_EQ(cl->phase_filter.window_start_ms, 100);
  EXPECT_EQ(cl->phase_filter.window_end_ms, 2500);
  EXPECT_FALSE(ParseCommandLine({"peak", "t.pb", "--window", "5:5"}).ok());
  EXPECT_FALSE(ParseCommandLine({"peak", "t.pb", "--window", "x"}).ok());
  EXPECT_FALSE(ParseCommandLine({"peak", "t.pb", "--phase", "a", "--window", "1:2"}).ok());
  EXPECT_FALSE(ParseCommandLine({"peak", "t.pb", "--phase="}).ok());
}

}  // namespace
}  // namespace cumemtrace::analyzer
