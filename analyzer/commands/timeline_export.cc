#include "analyzer/commands/timeline_export.h"

#include "absl/strings/str_cat.h"

namespace cumemtrace::analyzer {

absl::StatusOr<ModelAndHistory> AnalyzeWithHistory(const CommandLine& cl, const AnalyzeOptions& needs,
                                                   HistoryOptions history_options, Console& console) {
  ProgressBar progress(console.err(), absl::StrCat("reading ", cl.trace));
  absl::StatusOr<std::unique_ptr<Analysis>> analysis = AnalyzeTrace(cl.trace, needs, console, &progress);
  if (!analysis.ok()) return analysis.status();
  progress.SetLabel("timelines");
  history_options.progress = progress.FractionCallback((*analysis)->model.events);
  absl::StatusOr<History> history = ReadHistory(**analysis, history_options);
  progress.Done();
  if (!history.ok()) return history.status();
  return ModelAndHistory{std::move(*analysis), std::move(*history)};
}

}  // namespace cumemtrace::analyzer
