// PyTorch's allocator replayed on a thread of its own, or by the reader's thread while it waits (LayerThread's
// kOwnThread and kShared, model/torch/layer_thread.h), must change nothing a report says: on every example trace, the
// summary (peaks with what was live, leaks, failed allocations and OOMs with the allocator's figures, the autograd
// judgement, the phases) is the same byte for byte as with the replay on the model's thread. The examples with
// PyTorch's layer have up to 60 000 allocator rows: many batches handed over, and waits at OOMs, at the allocator's
// attachment and, with NVTX ranges or found phases, the switch to running inline. Shared, how many batches the
// reader's thread applies depends on the scheduler (none with one CPU, where the reader has no second thread): the
// layer thread's unit test makes the help certain; this one checks the reports whoever applied them.
#include <algorithm>
#include <string>

#include "analyzer/model/analysis.h"
#include "analyzer/model/stacks/frame_resolver.h"
#include "analyzer/render/json/json_reports.h"
#include "analyzer/reports/summary_report.h"
#include "gtest/gtest.h"
#include "tests/golden/golden_support.h"

namespace cumemtrace::analyzer {
namespace {

using golden::ExampleTraces;

struct Summary {
  std::string json;
  bool torch = false;  // the trace has PyTorch's allocator layer
};

// The summary's JSON as `cumem-analyze summary --json --top 1000` builds it, with the replay where `threading` says.
Summary SummaryWith(const std::string& path, LayerThreading threading) {
  AnalyzeOptions options;
  options.peak_snapshots = true;
  options.oom_snapshots = true;
  options.pinned = true;
  options.layer_thread = threading;
  absl::StatusOr<std::unique_ptr<Analysis>> analysis = Analyze(path, options);
  EXPECT_TRUE(analysis.ok()) << analysis.status();
  if (!analysis.ok()) return {};
  const Analysis& a = **analysis;
  FrameResolver resolver(a.stacks, a.symbols, a.python_frames);
  ReportOptions report_options;
  report_options.top = 1000;
  report_options.frames = 64;
  const bool torch = a.allocator.attached || a.allocator.events;
  const Overview overview{&a.info, a.model, "stack", torch, &a.phases};
  return {SummaryJson(overview, BuildSummaryReport(a, report_options, resolver)), a.allocator.events};
}

// Where `a` and `b` first differ, as "line N: A | B", or "" when they are the same. (gtest's own diff of two reports
// of a few MB would take minutes.)
std::string FirstDifference(const std::string& a, const std::string& b) {
  if (a == b) return "";
  size_t line = 1, start = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()) && a[i] == b[i]; ++i) {
    if (a[i] == '\n') {
      ++line;
      start = i + 1;
    }
  }
  auto line_of = [start](const std::string& s) { return s.substr(start, s.find('\n', start) - start); };
  return "line " + std::to_string(line) + ": " + line_of(a) + " | " + line_of(b);
}

class LayerThreadExample : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerThreadExample, SameSummaryAsInline) {
  const std::string path = std::string(CUMEMTRACE_EXAMPLES_DIR) + "/" + GetParam() + ".pb";
  const Summary inline_replay = SummaryWith(path, LayerThreading::kInline);
  const Summary own_thread = SummaryWith(path, LayerThreading::kOwnThread);
  const Summary shared = SummaryWith(path, LayerThreading::kShared);
  ASSERT_FALSE(inline_replay.json.empty());
  EXPECT_EQ(FirstDifference(own_thread.json, inline_replay.json), "");
  EXPECT_EQ(FirstDifference(shared.json, inline_replay.json), "");
  if (inline_replay.torch) {
    EXPECT_NE(inline_replay.json.find("\"allocator\""), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, LayerThreadExample, ::testing::ValuesIn(ExampleTraces()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace cumemtrace::analyzer
