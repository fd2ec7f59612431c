// Python frames and grouping for people, through a trace built by hand: a training loop on the main thread (two
// stacks through the same line of train.py), a validation step, a worker thread (threading.Thread) and an autograd
// thread with no Python frames. Every number below is worked out here from the events, not by the analyzer:
//
//   t (ms)  thread     event                                   stack
//   10      main #0    alloc 1000 B at 0x100                   S1  train_step:37 via module.py forward
//   20      main #0    alloc  500 B at 0x200                   S2  train_step:37 via another c10 frame
//   30      worker #1  alloc  300 B at 0x300                   S4  worker:20 under threading.py run
//   40      autograd #2 alloc 200 B at 0x400                   S5  no Python frames: c10 only
//   50      main #0    alloc 2000 B at 0x500 (device peak 4000) S3  validate:42
//   60      main #0    free 0x500
//   70      main #0    alloc  100 B at 0x600                   S1
//   80      main #0    cudaMalloc 1 TiB fails (100 B free of 10000 B); live 2100 B   S3
//   end 100 ms (trailer)
//
// At the peak (4000 B): validate:42 2000 B, train_step:37 1500 B (S1 + S2: 2 stacks), worker:20 300 B, no user
// frame (c10 alloc) 200 B. Live at the end: 2100 B in 5; train_step:37 1600 B in 3, of it already allocated at
// 25/50/75/100 ms: 1500, 1500, 1600, 1600.
#include <string>
#include <vector>

#include "analyzer/commands/run_cli.h"
#include "analyzer/model/analysis.h"
#include "analyzer/reports/leak_report.h"
#include "analyzer/reports/oom_report.h"
#include "analyzer/reports/peak_report.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/json_value.h"
#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer::test {
namespace {

constexpr uint64_t kTrace = 0x1100;   // libcumemtrace.so
constexpr uint64_t kCudart = 0x10100;  // libcudart.so.13 cudaMalloc
constexpr uint64_t kAlloc = 0x30100;   // libc10_cuda.so c10::cuda::alloc
constexpr uint64_t kAlloc2 = 0x30200;  // libc10_cuda.so, another path into it
constexpr char kTrain[] = "/home/u/proj/train.py";
constexpr char kModule[] = "/home/u/venv/lib/python3.11/site-packages/torch/nn/modules/module.py";

struct Stacks {
  uint64_t s1, s2, s3, s4, s5;
};

std::string WritePythonTrace(const std::string& name, Stacks* stacks = nullptr) {
  TraceBuilder b;
  format::Header h = TraceBuilder::DefaultHeader();
  h.set_executable("/usr/bin/python3.11");
  h.set_python_frames_enabled(true);
  b.Header(h)
      .Device(0, "NVIDIA H200", 10000)
      .Thread(0, 100, "python")
      .Thread(1, 101, "worker")
      .Thread(2, 102, "autograd")
      .Module(1, "/opt/cumemtrace/lib/libcumemtrace.so", 0x1000, 0x1000, 0x2000)
      .Module(2, "/usr/lib/x86_64-linux-gnu/libcudart.so.13", 0x10000, 0x10000, 0x20000)
      .Module(3, "/home/u/venv/lib/python3.11/site-packages/torch/lib/libc10_cuda.so", 0x30000, 0x30000, 0x40000)
      .Strings(1, {"train_step", kTrain, "<module>", "forward", kModule, "validate", "run",
                   "/usr/lib/python3.11/threading.py", "worker", "cudaMalloc", "c10::cuda::alloc", "c10::cuda::retry",
                   "CUDACachingAllocator.cpp"})
      // 1 train_step:37  2 <module>:60  3 forward:1501  4 validate:42  5 run:982 (threading)  6 worker:20
      .PythonFrames(1, {1, 3, 4, 6, 7, 9}, {2, 2, 5, 2, 8, 2}, {37, 60, 1501, 42, 982, 20});
  Stacks s;
  s.s1 = b.Stack({kTrace, kCudart, kAlloc, PyPc(3), PyPc(1), PyPc(2)});
  s.s2 = b.Stack({kTrace, kCudart, kAlloc, kAlloc2, PyPc(1), PyPc(2)});
  s.s3 = b.Stack({kTrace, kCudart, kAlloc, PyPc(4), PyPc(2)});
  s.s4 = b.Stack({kTrace, kCudart, kAlloc, PyPc(6), PyPc(5)});
  s.s5 = b.Stack({kTrace, kCudart, kAlloc, PyPc(0)});
  if (stacks != nullptr) *stacks = s;
  Ev oom = Alloc(8, 80, 0, uint64_t{1} << 40, s.s3);
  oom.result = 2;
  oom.has_mem_info = true;
  oom.free_bytes = 100;
  oom.total_bytes = 10000;
  b.Events({Alloc(1, 10, 0x100, 1000, s.s1), Alloc(2, 20, 0x200, 500, s.s2),
            Alloc(3, 30, 0x300, 300, s.s4, format::Api::kCudaMalloc, 0, 1),
            Alloc(4, 40, 0x400, 200, s.s5, format::Api::kCudaMalloc, 0, 2), Alloc(5, 50, 0x500, 2000, s.s3),
            Free(6, 60, 0x500), Alloc(7, 70, 0x600, 100, s.s1), oom})
      .SymbolsWithLines({kCudart, kAlloc, kAlloc2}, {10, 11, 12}, {2, 3, 3}, {0, 0, 0}, {0, 13, 13}, {0, 120, 240})
      .Trailer(8, kStartNs + 100'000'000);
  return b.Write(name);
}

std::unique_ptr<Analysis> Load(const std::string& path, GroupBy by, const std::string& regex = "") {
  AnalyzeOptions o;
  o.grouping = GroupingOptions{by, regex};
  absl::StatusOr<std::unique_ptr<Analysis>> a = Analyze(path, o);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *std::move(a) : nullptr;
}


TEST(PythonFrames, ResolverNamesPythonFramesAndTheMarker) {
  Stacks s;
  auto a = Load(WritePythonTrace("py_resolve.pb", &s), GroupBy::kUser);
  ASSERT_NE(a, nullptr);
  FrameResolver resolver(a->stacks, a->symbols, a->python_frames);
  const std::vector<analyzer::Frame> f = resolver.ResolveStack(s.s1, 100);
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(f[1].kind, FrameKind::kNative);
  EXPECT_EQ(f[1].function, "cudaMalloc");
  EXPECT_EQ(f[2].file, "CUDACachingAllocator.cpp");
  EXPECT_EQ(f[2].line, 120u);
  EXPECT_EQ(f[3].kind, FrameKind::kPython);
  EXPECT_EQ(f[3].function, "forward");
  EXPECT_EQ(f[3].file, kModule);
  EXPECT_EQ(f[3].line, 1501u);
  EXPECT_EQ(f[3].module, "");
  EXPECT_FALSE(f[3].offset.has_value());
  EXPECT_EQ(f[4].function, "train_step");
  EXPECT_EQ(f[5].function, "<module>");
  const std::vector<analyzer::Frame> autograd = resolver.ResolveStack(s.s5, 100);
  ASSERT_EQ(autograd.size(), 4u);
  EXPECT_EQ(autograd[3].kind, FrameKind::kNoPython);
  EXPECT_EQ(autograd[3].function, "<no Python frames on this thread>");
  // The worker thread's innermost user frame is its target, not threading.py.
  EXPECT_EQ(*a->grouper->Describe(s.s4).user_frame, PyPc(6));
  EXPECT_FALSE(a->grouper->Describe(s.s5).user_frame.has_value());
  EXPECT_EQ(*a->grouper->Describe(s.s5).outer_frame, kAlloc);
}

TEST(Grouping, StacksSharingAUserFrameMergeAndAddUpToThePeak) {
  Stacks s;
  auto a = Load(WritePythonTrace("py_group.pb", &s), GroupBy::kUser);
  ASSERT_NE(a, nullptr);
  const PeakResult* p = a->FindPeak(0, kDeviceTotalSeries);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->counter.peak_bytes, 4000u);
  const std::vector<StackGroup>& g = p->at_peak.groups;
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0].key, (GroupKey{GroupKey::Kind::kFrame, PyPc(4)}));  // validate:42
  EXPECT_EQ(g[0].bytes, 2000u);
  EXPECT_EQ(g[1].key, (GroupKey{GroupKey::Kind::kFrame, PyPc(1)}));  // train_step:37
  EXPECT_EQ(g[1].bytes, 1500u);
  EXPECT_EQ(g[1].count, 2u);
  EXPECT_EQ(g[1].stacks, 2u);
  EXPECT_EQ(g[1].stack, s.s1);  // the largest of the two
  EXPECT_EQ(g[2].key, (GroupKey{GroupKey::Kind::kFrame, PyPc(6)}));  // worker:20
  EXPECT_EQ(g[3].key, (GroupKey{GroupKey::Kind::kFallback, kAlloc}));  // autograd: no user frame
  EXPECT_EQ(g[3].bytes, 200u);
  EXPECT_EQ(p->at_peak.group_count, 4u);

  // With --top 2 the groups not shown are other_bytes, and the two add up to the peak exactly.
  FrameResolver resolver(a->stacks, a->symbols, a->python_frames);
  ReportOptions options;
  options.top = 2;
  const PeakReport r = BuildPeakReport(*a, options, resolver);
  ASSERT_EQ(r.device_totals.size(), 1u);
  const PeakSection& t = r.device_totals[0];
  ASSERT_EQ(t.top.size(), 2u);
  EXPECT_EQ(t.top[0].bytes + t.top[1].bytes + t.other_bytes, 4000u);
  EXPECT_EQ(t.other_bytes, 500u);
  EXPECT_EQ(t.other_count, 2u);
  EXPECT_EQ(t.top[1].label.user_frame->function, "train_step");
  EXPECT_EQ(t.top[1].label.stacks, 2u);
}

TEST(Grouping, ByStackKeepsEveryStackApart) {
  Stacks s;
  auto a = Load(WritePythonTrace("py_stack.pb", &s), GroupBy::kStack);
  ASSERT_NE(a, nullptr);
  const PeakResult* p = a->FindPeak(0, kDeviceTotalSeries);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->at_peak.groups.size(), 5u);
  uint64_t sum = 0;
  for (const StackGroup& g : p->at_peak.groups) {
    EXPECT_EQ(g.stacks, 1u);
    EXPECT_EQ(g.key, (GroupKey{GroupKey::Kind::kStack, g.stack}));
    sum += g.bytes;
  }
  EXPECT_EQ(sum, 4000u);
}

TEST(Grouping, ByFrameRegexKeysByTheInnermostMatchingFrame) {
  Stacks s;
  auto a = Load(WritePythonTrace("py_frame.pb", &s), GroupBy::kFrame, "^(forward|validate)$");
  ASSERT_NE(a, nullptr);
  const PeakResult* p = a->FindPeak(0, kDeviceTotalSeries);
  ASSERT_NE(p, nullptr);
  const std::vector<StackGroup>& g = p->at_peak.groups;
  // validate (S3) 2000 B; S2, S4 and S5 have no matching frame and fall back to their innermost frame outside the
  // runtime, c10's alloc for all three: 500 + 300 + 200 = 1000 B in 3, ahead of forward (S1) 1000 B in 1.
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].key, (GroupKey{GroupKey::Kind::kFrame, PyPc(4)}));
  EXPECT_EQ(g[1].key, (GroupKey{GroupKey::Kind::kFallback, kAlloc}));
  EXPECT_EQ(g[1].bytes, 1000u);
  EXPECT_EQ(g[1].count, 3u);
  EXPECT_EQ(g[1].stacks, 3u);
  EXPECT_EQ(g[2].key, (GroupKey{GroupKey::Kind::kFrame, PyPc(3)}));
  EXPECT_EQ(g[2].bytes, 1000u);
  // A file matches too.
  auto by_file = Load(WritePythonTrace("py_frame_file.pb"), GroupBy::kFrame, "threading\\.py$");
  ASSERT_NE(by_file, nullptr);
  EXPECT_EQ(by_file->FindPeak(0, kDeviceTotalSeries)->at_peak.groups[1].key,
            (GroupKey{GroupKey::Kind::kFrame, PyPc(5)}));
}

TEST(Grouping, LeaksMergeAndShowGrowth) {
  Stacks s;
  auto a = Load(WritePythonTrace("py_leaks.pb", &s), GroupBy::kUser);
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->leaks.size(), 3u);
  const LeakGroup& top = a->leaks[0];
  EXPECT_EQ(top.key, (GroupKey{GroupKey::Kind::kFrame, PyPc(1)}));
  EXPECT_EQ(top.bytes, 1600u);
  EXPECT_EQ(top.count, 3u);
  EXPECT_EQ(top.stacks, 2u);
  EXPECT_EQ(top.stack, s.s1);
  EXPECT_EQ(top.growth, (std::array<uint64_t, 4>{1500, 1500, 1500, 1600}));  // quarters of the events' span
  EXPECT_EQ(a->leaks[1].growth, (std::array<uint64_t, 4>{0, 300, 300, 300}));
  EXPECT_EQ(a->leaks[2].growth, (std::array<uint64_t, 4>{0, 200, 200, 200}));
}

TEST(Grouping, OomSnapshotsMergeAtTheEnd) {
  auto a = Load(WritePythonTrace("py_oom.pb"), GroupBy::kUser);
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->ooms.size(), 1u);
  const GroupedSnapshot& g = a->ooms[0].live_by_stack;
  EXPECT_EQ(g.total_bytes, 2100u);
  ASSERT_EQ(g.groups.size(), 3u);
  EXPECT_EQ(g.groups[0].bytes, 1600u);
  EXPECT_EQ(g.groups[0].stacks, 2u);
}

TEST(PythonView, OomAndLeaksOpenWithADiagnosis) {
  const std::string path = WritePythonTrace("py_cli.pb");
  ToolResult r = Tool({"oom", path});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = r.out.find('\n', at)) != std::string::npos; at = nl + 1) {
    lines.push_back(r.out.substr(at, nl - at));
  }
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[2],
            "device 0 ran out of memory at /home/u/proj/train.py:42 validate: cudaMalloc of 1.0 TiB failed (out of "
            "memory), 100 B free of 9.8 KiB; 2.1 KiB was live, 76% of it allocated at /home/u/proj/train.py:37 "
            "train_step");
  r = Tool({"leaks", path});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\n\n2.1 KiB in 5 allocations still live at exit; 1.6 KiB of it allocated at "
                       "/home/u/proj/train.py:37 train_step (3 allocations of device on device 0), growing over the "
                       "run: 1.5 KiB, 1.5 KiB, 1.5 KiB, 1.6 KiB\n"),
            std::string::npos)
      << r.out;
  // Groups name their user frame; the one without names where it was keyed; Python paths inside packages are
  // shortened in text.
  r = Tool({"peak", path, "--frames", "6"});
  EXPECT_NE(r.out.find("     1.5 KiB   37.5%  2 allocations     at /home/u/proj/train.py:37 train_step  (2 stacks, the "
                       "largest #"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("no user frame; in c10::cuda::alloc  CUDACachingAllocator.cpp:120  (libc10_cuda.so)"),
            std::string::npos)
      << r.out;
  // Python frames lead (the user's first), the native frames fold into one line.
  EXPECT_NE(r.out.find("        train_step (/home/u/proj/train.py:37)\n        <module> (/home/u/proj/train.py:60)\n"
                       "        forward (torch/nn/modules/module.py:1501)\n        [3 native frames: c10::cuda::alloc]\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("        <no Python frames on this thread>\n"), std::string::npos) << r.out;
}

TEST(PythonView, JsonShape) {
  const std::string path = WritePythonTrace("py_json.pb");
  JsonValue j = Json(Tool({"summary", path, "--json"}));
  EXPECT_EQ(j["schema_version"].integer(), 2);
  EXPECT_EQ(j["group_by"].str(), "user");
  const JsonValue* total = nullptr;
  for (const JsonValue& t : j["device_totals"].array()) total = &t;
  ASSERT_NE(total, nullptr);
  const JsonValue& g = (*total)["top"].array()[1];
  EXPECT_EQ(g["bytes"].integer(), 1500);
  EXPECT_EQ(g["stacks"].integer(), 2);
  EXPECT_EQ(g["user_frame"]["kind"].str(), "python");
  EXPECT_EQ(g["user_frame"]["function"].str(), "train_step");
  EXPECT_EQ(g["user_frame"]["file"].str(), kTrain);
  EXPECT_EQ(g["user_frame"]["line"].integer(), 37);
  EXPECT_TRUE(g["user_frame"]["module"].is_null());
  EXPECT_TRUE(g["user_frame"]["offset"].is_null());
  EXPECT_EQ(g["user_frame"]["pc"].str(), "0x8000000000000001");
  // The stack mixes native and Python frames, innermost first.
  const std::vector<JsonValue>& stack = g["stack"].array();
  ASSERT_EQ(stack.size(), 6u);
  EXPECT_EQ(stack[0]["kind"].str(), "native");
  EXPECT_EQ(stack[3]["kind"].str(), "python");
  EXPECT_EQ(stack[3]["file"].str(), kModule);  // JSON keeps paths as recorded
  const JsonValue& fallback = (*total)["top"].array()[3];
  EXPECT_TRUE(fallback["user_frame"].is_null());
  EXPECT_EQ(fallback["group_frame"]["function"].str(), "c10::cuda::alloc");
  EXPECT_EQ(fallback["stack"].array().back()["kind"].str(), "no_python");
  EXPECT_EQ(fallback["stack"].array().back()["function"].str(), "<no Python frames on this thread>");
  EXPECT_TRUE(fallback["stack"].array().back()["line"].is_null());

  const JsonValue& leak = j["leaks"].array()[0];
  EXPECT_EQ(leak["stacks"].integer(), 2);
  ASSERT_EQ(leak["growth"].array().size(), 4u);
  EXPECT_EQ(leak["growth"].array()[0].integer(), 1500);
  EXPECT_EQ(leak["growth"].array()[3].integer(), leak["bytes"].integer());
  const JsonValue& oom = j["ooms"].array()[0];
  EXPECT_EQ(oom["user_frame"]["function"].str(), "validate");
  EXPECT_EQ(oom["live_by_stack"].array()[0]["stacks"].integer(), 2);

  // --group-by stack: one stack per group, user_frame still named.
  j = Json(Tool({"peak", path, "--json", "--group-by", "stack"}));
  EXPECT_EQ(j["group_by"].str(), "stack");
  for (const JsonValue& t : j["device_totals"].array()) {
    EXPECT_EQ(t["top"].array().size(), 5u);
    for (const JsonValue& grp : t["top"].array()) {
      EXPECT_EQ(grp["stacks"].integer(), 1);
      EXPECT_TRUE(grp["group_frame"].is_null());
    }
    EXPECT_EQ(t["top"].array()[0]["user_frame"]["function"].str(), "validate");
  }
}

TEST(PythonView, GroupByErrorsAreOneLine) {
  ToolResult r = Tool({"peak", "x.pb", "--group-by", "line"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "cumem-analyze: --group-by takes user, stack, python or frame=REGEX, not 'line' (see cumem-analyze --help)\n");
  r = Tool({"peak", "x.pb", "--group-by=frame=(unclosed"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("cumem-analyze: --group-by frame=(unclosed: not a regular expression (", 0), 0u) << r.err;
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
