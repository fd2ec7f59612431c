// `cumem-analyze peak TRACE.pb`.
#include "analyzer/commands/command.h"
#include "analyzer/commands/report_command.h"
#include "analyzer/render/json/json_reports.h"
#include "analyzer/render/text/text_reports.h"
#include "analyzer/reports/peak_report.h"

namespace cumemtrace::analyzer {
namespace {

int Run(const CommandLine& cl, Console& console) {
  return RunReport(cl, console, ReportParts<PeakReport>{{.peak_snapshots = true}, 12, BuildPeakReport, PeakText, PeakJson});
}

}  // namespace

extern const CommandSpec kPeakCommand = {
    "peak", "TRACE.pb [--json] [--top N] [--frames N] [--group-by HOW] [--phase NAME|--window A:B]",
    "the peaks, with more stacks and frames",
    Operands::kOneTrace, kReportFlags, OutputFile::kNone, Run};

}  // namespace cumemtrace::analyzer
