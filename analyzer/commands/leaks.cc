// `cumem-analyze leaks TRACE.pb`.
#include "analyzer/commands/command.h"
#include "analyzer/commands/report_command.h"
#include "analyzer/render/json/json_reports.h"
#include "analyzer/render/text/text_reports.h"
#include "analyzer/reports/leak_report.h"

namespace cumemtrace::analyzer {
namespace {

int Run(const CommandLine& cl, Console& console) {
  return RunReport(cl, console, ReportParts<LeakReport>{{}, 8, BuildLeakReport, LeaksText, LeaksJson});
}

}  // namespace

extern const CommandSpec kLeaksCommand = {
    "leaks", "TRACE.pb [--json] [--top N] [--frames N] [--group-by HOW] [--phase NAME|--window A:B]",
    "allocations still live at the end of the trace, by device, kind and group, with growth",
    Operands::kOneTrace, kReportFlags, OutputFile::kNone, Run};

}  // namespace cumemtrace::analyzer
