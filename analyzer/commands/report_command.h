// The shape the five reports over one trace share (summary, peak, leaks, pinned, oom): analyze with what the
// report needs, build its struct, render it as text or JSON. Each of them is a file of this folder that names its
// parts; this is the one function that runs them.
#ifndef CUMEMTRACE_ANALYZER_COMMANDS_REPORT_COMMAND_H_
#define CUMEMTRACE_ANALYZER_COMMANDS_REPORT_COMMAND_H_

#include <algorithm>
#include <memory>
#include <string>

#include "analyzer/commands/analyze_step.h"
#include "analyzer/model/stacks/frame_resolver.h"

namespace cumemtrace::analyzer {

// The flags every report over one trace takes.
inline constexpr uint32_t kReportFlags = kFlagJson | kFlagTop | kFlagFrames | kFlagGroupBy | kFlagPhase;

// What a report needs from the model beyond its groups.
struct ReportNeeds {
  bool peak_snapshots = false;
  bool oom_snapshots = false;
  bool pinned = false;
};

template <typename Report>
struct ReportParts {
  ReportNeeds needs;
  size_t text_frames;  // frames per stack in text unless --frames says otherwise
  Report (*build)(const Analysis&, const ReportOptions&, FrameResolver&);
  std::string (*text)(const Overview&, const Report&);
  std::string (*json)(const Overview&, const Report&);
  // A pass of the model beyond the analysis that the report adds (oom: the allocator replay), or null.
  void (*extend)(const CommandLine&, Report*) = nullptr;
};

template <typename Report>
int RunReport(const CommandLine& cl, Console& console, const ReportParts<Report>& parts,
              ReportOptions options) {
  AnalyzeOptions needs;
  needs.max_groups = std::max<size_t>(cl.top, 1);
  needs.peak_snapshots = parts.needs.peak_snapshots;
  needs.oom_snapshots = parts.needs.oom_snapshots;
  needs.pinned = parts.needs.pinned;
  needs.grouping = cl.grouping;
  needs.phase_filter = cl.phase_filter;
  absl::StatusOr<std::unique_ptr<Analysis>> analysis = AnalyzeTrace(cl.trace, needs, console);
  if (!analysis.ok()) return console.Error(analysis.status());
  const Analysis& a = **analysis;
  FrameResolver resolver(a.stacks, a.symbols, a.python_frames);
  Report report = parts.build(a, options, resolver);
  if (parts.extend != nullptr) parts.extend(cl, &report);
  const Overview overview = OverviewOf(a, cl);
  return console.Report(cl.json ? parts.json(overview, report) : parts.text(overview, report));
}

template <typename Report>
int RunReport(const CommandLine& cl, Console& console, const ReportParts<Report>& parts) {
  return RunReport(cl, console, parts, ReportOptionsFor(cl, parts.text_frames));
}

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_COMMANDS_REPORT_COMMAND_H_
