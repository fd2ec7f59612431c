// `cumem-analyze oom TRACE.pb`.
#include "analyzer/commands/command.h"
#include "analyzer/commands/report_command.h"
#include "analyzer/model/torch/allocator_whatif.h"
#include "analyzer/render/json/json_reports.h"
#include "analyzer/render/text/text_reports.h"
#include "analyzer/reports/oom_report.h"

namespace cumemtrace::analyzer {
namespace {

// A PyTorch OOM gets the allocator replay's answers: the recorded run replayed, then the settings worth trying.
void AddReplays(const CommandLine& cl, OomReport* report) {
  if (report->torch_ooms.empty()) return;
  absl::StatusOr<ReplayInputPtr> input = ReadReplayInput(cl.trace);
  if (!input.ok()) return;
  std::vector<WhatIf> replays = {ReplayWhatIf(**input, WhatIfOptions{})};
  for (const WhatIfOptions& options : OomReplayCandidates(replays.front())) {
    replays.push_back(ReplayWhatIf(**input, options));
  }
  AddReplayChecks(replays, report);
}

int Run(const CommandLine& cl, Console& console) {
  return RunReport(cl, console,
                   ReportParts<OomReport>{{.oom_snapshots = true}, 12, BuildOomReport, OomText, OomJson, AddReplays});
}

}  // namespace

extern const CommandSpec kOomCommand = {
    "oom", "TRACE.pb [--json] [--top N] [--frames N] [--group-by HOW] [--phase NAME|--window A:B]",
    "every failed allocation: request, driver error, free memory, what was live then, who asked",
    Operands::kOneTrace, kReportFlags, OutputFile::kNone, Run};

}  // namespace cumemtrace::analyzer
