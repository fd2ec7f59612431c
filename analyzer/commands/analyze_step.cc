#include "analyzer/commands/analyze_step.h"

#include <optional>

#include "absl/strings/str_cat.h"

namespace cumemtrace::analyzer {

absl::StatusOr<std::unique_ptr<Analysis>> AnalyzeTrace(const std::string& path, AnalyzeOptions options,
                                                       Console& console, ProgressBar* progress) {
  std::optional<ProgressBar> own;
  if (progress == nullptr) progress = &own.emplace(console.err(), absl::StrCat("reading ", path));
  options.progress = progress->EventsCallback();
  options.progress_stage = [progress, &path](const std::string& stage) {
    progress->SetLabel(absl::StrCat(path, ": ", stage));
  };
  absl::StatusOr<std::unique_ptr<Analysis>> analysis = Analyze(path, options);
  progress->Done();
  if (analysis.ok()) console.Warn((*analysis)->info);
  return analysis;
}

AnalyzeOptions ExportNeeds(const CommandLine& cl) {
  AnalyzeOptions options;
  options.peak_snapshots = true;
  options.oom_snapshots = false;
  options.pinned = false;
  options.max_groups = kAllGroups;
  options.grouping = GroupingOptions{GroupBy::kStack, ""};
  options.phase_filter = cl.phase_filter;
  return options;
}

ReportOptions ReportOptionsFor(const CommandLine& cl, size_t text_frames) {
  ReportOptions r;
  r.top = cl.top;
  r.frames = cl.frames.value_or(cl.json ? kJsonFrames : text_frames);
  return r;
}

Overview OverviewOf(const Analysis& a, const CommandLine& cl) {
  return Overview{&a.info, a.model, GroupingName(cl.grouping), a.allocator.attached || a.allocator.events,
                  &a.phases};
}

}  // namespace cumemtrace::analyzer
