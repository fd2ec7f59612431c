// The step the exports drawn over time share (html, pprof, perfetto): the model, then a second read for memory
// over time (History), one progress line across both.
#ifndef CUMEMTRACE_ANALYZER_COMMANDS_TIMELINE_EXPORT_H_
#define CUMEMTRACE_ANALYZER_COMMANDS_TIMELINE_EXPORT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "analyzer/commands/analyze_step.h"
#include "analyzer/model/memory/history.h"

namespace cumemtrace::analyzer {

struct ModelAndHistory {
  std::unique_ptr<Analysis> analysis;
  History history;
};

// `history_options.progress` is set here.
absl::StatusOr<ModelAndHistory> AnalyzeWithHistory(const CommandLine& cl, const AnalyzeOptions& needs,
                                                   HistoryOptions history_options, Console& console);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_COMMANDS_TIMELINE_EXPORT_H_
