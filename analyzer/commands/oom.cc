// `cumem-analyze oom TRACE.pb`.
#include "analyzer/commands/command.h"
#include "analyzer/commands/report_command.h"
#include "analyzer/commands/oom_replays.h"
#include "analyzer/render/json/json_reports.h"
#include "analyzer/render/text/text_reports.h"
#include "analyzer/reports/oom_report.h"

namespace cumemtrace::analyzer {
namespace {

int Run(const CommandLine& cl, Console& console) {
  return RunReport(cl, console,
                   ReportParts<OomReport>{{.oom_snapshots = true}, 12, BuildOomReport, OomText, OomJson, AddOomReplays});
}

}  // namespace

extern const CommandSpec kOomCommand = {
    "oom", "TRACE.pb [--json] [--top N] [--frames N] [--group-by HOW] [--phase NAME|--window A:B]",
    "every failed allocation: request, driver error, free memory, what was live then, who asked",
    Operands::kOneTrace, kReportFlags, OutputFile::kNone, Run};

}  // namespace cumemtrace::analyzer
