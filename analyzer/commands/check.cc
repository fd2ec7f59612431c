// `cumem-analyze check TRACE.pb --max-peak SIZE ...`: a CI gate. Exit 1 (kExitFinding) with a one-line reason
// when a bound is broken.
#include <memory>

#include "analyzer/commands/analyze_step.h"
#include "analyzer/commands/command.h"
#include "analyzer/render/text/check_text.h"
#include "analyzer/reports/check.h"

namespace cumemtrace::analyzer {
namespace {

int Run(const CommandLine& cl, Console& console) {
  AnalyzeOptions needs;
  needs.peak_snapshots = cl.bounds.max_peak.has_value();  // the largest group at a peak over the bound
  needs.oom_snapshots = false;
  needs.pinned = false;
  needs.max_groups = 1;
  needs.grouping = cl.grouping;
  needs.phase_filter = cl.phase_filter;  // check --phase validate --max-peak 8GiB
  absl::StatusOr<std::unique_ptr<Analysis>> analysis = AnalyzeTrace(cl.trace, needs, console);
  if (!analysis.ok()) return console.Error(analysis.status());
  const Analysis& a = **analysis;
  FrameResolver resolver(a.stacks, a.symbols, a.python_frames);
  const CheckReport report = BuildCheckReport(a, cl.bounds, resolver);
  if (int code = console.Report(CheckLine(report) + "\n"); code != kExitOk) return code;
  return report.passed ? kExitOk : kExitFinding;
}

}  // namespace

extern const CommandSpec kCheckCommand = {
    "check", "TRACE.pb [--max-peak SIZE] [--max-leak SIZE] [--no-oom] [--device N|host] [--kind K] [--phase NAME]",
    "a CI gate: exit 1 with a one-line reason when the peak (the device total, or --kind K) is over\n"
    "--max-peak, more than --max-leak is live at the end, or (--no-oom) an allocation failed; --device N (or\n"
    "host) scopes it; exit 0 within bounds",
    Operands::kOneTrace, kFlagBounds | kFlagScope | kFlagGroupBy | kFlagPhase, OutputFile::kNone, Run};

}  // namespace cumemtrace::analyzer
