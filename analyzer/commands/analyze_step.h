// The read + model step that every command over whole traces shares: Analyze with a progress line on a terminal,
// the trace's warnings on stderr once it is read. And the report options a command line asks for.
#ifndef CUMEMTRACE_ANALYZER_COMMANDS_ANALYZE_STEP_H_
#define CUMEMTRACE_ANALYZER_COMMANDS_ANALYZE_STEP_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "analyzer/commands/command_line.h"
#include "analyzer/commands/console.h"
#include "analyzer/model/analysis.h"
#include "analyzer/progress.h"
#include "analyzer/reports/report_common.h"

namespace cumemtrace::analyzer {

// Groups kept per snapshot where a command needs them all (diff matches every group; exports draw every stack).
inline constexpr size_t kAllGroups = size_t{1} << 20;
// Frames per stack in JSON unless --frames says otherwise.
inline constexpr size_t kJsonFrames = 64;

// Reads and models `path`. `progress`, when given, is the caller's bar (kept for its later steps); otherwise one
// is drawn for the read alone.
absl::StatusOr<std::unique_ptr<Analysis>> AnalyzeTrace(const std::string& path, AnalyzeOptions options,
                                                       Console& console, ProgressBar* progress = nullptr);

// The model as the exports need it: every stack its own group, none dropped, the peaks' snapshots, inside
// --phase / --window.
AnalyzeOptions ExportNeeds(const CommandLine& cl);

// --top and --frames, or the command's defaults: `text_frames` in text, kJsonFrames in JSON.
ReportOptions ReportOptionsFor(const CommandLine& cl, size_t text_frames);

// The lines every report starts from: the trace, the model's counts, how stacks were grouped.
Overview OverviewOf(const Analysis& a, const CommandLine& cl);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_COMMANDS_ANALYZE_STEP_H_
