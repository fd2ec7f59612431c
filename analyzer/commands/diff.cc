// `cumem-analyze diff A.pb B.pb`: two traces compared, group by group.
#include <memory>

#include "analyzer/commands/analyze_step.h"
#include "analyzer/commands/command.h"
#include "analyzer/render/diff_render.h"
#include "analyzer/reports/diff_report.h"

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kDiffTextFrames = 8;

int Run(const CommandLine& cl, Console& console) {
  AnalyzeOptions needs;
  needs.oom_snapshots = false;
  needs.pinned = false;
  needs.max_groups = kAllGroups;  // every group is matched against the other trace's
  needs.allocation_totals = true;
  needs.grouping = cl.grouping;
  absl::StatusOr<std::unique_ptr<Analysis>> a = AnalyzeTrace(cl.trace, needs, console);
  if (!a.ok()) return console.Error(a.status());
  absl::StatusOr<std::unique_ptr<Analysis>> b = AnalyzeTrace(cl.second_trace, needs, console);
  if (!b.ok()) return console.Error(b.status());
  FrameResolver a_resolver((*a)->stacks, (*a)->symbols, (*a)->python_frames);
  FrameResolver b_resolver((*b)->stacks, (*b)->symbols, (*b)->python_frames);
  const ReportOptions options = ReportOptionsFor(cl, kDiffTextFrames);
  const DiffReport report = BuildDiffReport(**a, a_resolver, **b, b_resolver, options);
  const DiffHeading heading{cl.trace, cl.second_trace, GroupingName(cl.grouping), options.frames};
  return console.Report(cl.json ? DiffJson(heading, report) : DiffText(heading, report));
}

}  // namespace

extern const CommandSpec kDiffCommand = {
    "diff", "A.pb B.pb [--json] [--top N] [--frames N] [--group-by HOW]",
    "two traces compared: peaks, live at the end, allocations made over the run (churn), and the groups\n"
    "live at each peak, at the end and allocating, matched by function, file and line (never addresses),\n"
    "largest growth or shrink first",
    Operands::kTwoTraces, kFlagJson | kFlagTop | kFlagFrames | kFlagGroupBy, OutputFile::kNone, Run};

}  // namespace cumemtrace::analyzer
