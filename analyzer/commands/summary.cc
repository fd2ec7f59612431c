// `cumem-analyze [summary] TRACE.pb`: the default report.
#include "analyzer/commands/command.h"
#include "analyzer/commands/oom_replays.h"
#include "analyzer/commands/report_command.h"
#include "analyzer/render/json/json_reports.h"
#include "analyzer/render/text/text_reports.h"
#include "analyzer/reports/summary_report.h"

namespace cumemtrace::analyzer {
namespace {

// The text summary is an overview: fewer groups and frames than the reports it summarises.
constexpr size_t kSummaryTextGroups = 3;
constexpr size_t kSummaryTextFrames = 4;

int Run(const CommandLine& cl, Console& console) {
  const ReportParts<SummaryReport> parts{{.peak_snapshots = true, .oom_snapshots = true, .pinned = true},
                                         kSummaryTextFrames, BuildSummaryReport, SummaryText, SummaryJson,
                                         [](const CommandLine& cl, SummaryReport* r) { AddOomReplays(cl, &r->ooms); }};
  ReportOptions options = ReportOptionsFor(cl, parts.text_frames);
  if (!cl.json && !cl.top_given) options.top = kSummaryTextGroups;
  return RunReport(cl, console, parts, options);
}

}  // namespace

extern const CommandSpec kSummaryCommand = {
    "summary", "TRACE.pb [--json] [--top N] [--frames N] [--group-by HOW] [--phase NAME|--window A:B]",
    "(the default) process, devices, each device's and kind's peak with what was live then grouped by stack,\n"
    "leaks, failed allocations, pinned host memory spikes, tool health",
    Operands::kOneTrace, kReportFlags, OutputFile::kNone, Run};

}  // namespace cumemtrace::analyzer
