// `cumem-analyze ranks A.pb B.pb ...`: the traces of one job's ranks side by side. Every trace is read before
// anything is printed: one unreadable trace is one line naming it, and no report.
#include <memory>
#include <vector>

#include "analyzer/commands/analyze_step.h"
#include "analyzer/commands/command.h"
#include "analyzer/render/json/json_ranks.h"
#include "analyzer/render/text/text_ranks.h"
#include "analyzer/reports/ranks_report.h"

namespace cumemtrace::analyzer {
namespace {

int Run(const CommandLine& cl, Console& console) {
  AnalyzeOptions needs;  // the peaks' totals, leaks and failures; no snapshots
  needs.peak_snapshots = needs.oom_snapshots = needs.pinned = false;
  std::vector<RankEntry> entries;
  for (const std::string& path : cl.traces) {
    absl::StatusOr<std::unique_ptr<Analysis>> analysis = AnalyzeTrace(path, needs, console);
    if (!analysis.ok()) return console.Error(analysis.status());
    entries.push_back(BuildRankEntry(**analysis));
  }
  const RanksReport report = BuildRanksReport(std::move(entries));
  return console.Report(cl.json ? RanksJson(report) : RanksText(report));
}

}  // namespace

extern const CommandSpec kRanksCommand = {
    "ranks", "TRACE.pb TRACE.pb... [--json]",
    "the traces of the ranks of one job side by side: each device's peak, who held it, leaks, failed\n"
    "allocations, and the spread of device peaks across ranks",
    Operands::kManyTraces, kFlagJson, OutputFile::kNone, Run};

}  // namespace cumemtrace::analyzer
