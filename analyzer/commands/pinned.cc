// `cumem-analyze pinned TRACE.pb`.
#include "analyzer/commands/command.h"
#include "analyzer/commands/report_command.h"
#include "analyzer/render/json/json_reports.h"
#include "analyzer/render/text/text_reports.h"
#include "analyzer/reports/pinned_report.h"

namespace cumemtrace::analyzer {
namespace {

int Run(const CommandLine& cl, Console& console) {
  return RunReport(cl, console, ReportParts<PinnedReport>{{.pinned = true}, 8, BuildPinnedReport, PinnedText, PinnedJson});
}

}  // namespace

extern const CommandSpec kPinnedCommand = {
    "pinned", "TRACE.pb [--json] [--top N] [--frames N] [--group-by HOW] [--phase NAME|--window A:B]",
    "pinned host memory over time: peak, the windows where it rose most, and who caused them",
    Operands::kOneTrace, kReportFlags, OutputFile::kNone, Run};

}  // namespace cumemtrace::analyzer
