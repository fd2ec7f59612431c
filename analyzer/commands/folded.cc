// `cumem-analyze folded TRACE.pb [-o OUT]`: stacks live at each peak (or at the end) as folded stacks.
#include <memory>
#include <vector>

#include "analyzer/commands/analyze_step.h"
#include "analyzer/commands/command.h"
#include "analyzer/export/export_folded.h"
#include "analyzer/reports/stack_weights.h"

namespace cumemtrace::analyzer {
namespace {

int Run(const CommandLine& cl, Console& console) {
  absl::StatusOr<std::unique_ptr<Analysis>> analysis = AnalyzeTrace(cl.trace, ExportNeeds(cl), console);
  if (!analysis.ok()) return console.Error(analysis.status());
  const Analysis& a = **analysis;
  FrameResolver resolver(a.stacks, a.symbols, a.python_frames);
  const std::vector<WeightedStack> stacks = cl.leaks ? LeakStacks(a, cl.bounds) : PeakStacks(a, cl.bounds);
  return console.WriteOutput(cl.output, FoldedStacks(stacks, resolver));
}

}  // namespace

extern const CommandSpec kFoldedCommand = {
    "folded", "TRACE.pb [-o OUT] [--leaks] [--device N|host] [--kind K] [--phase NAME|--window A:B]",
    "stacks live at each peak (--leaks: at the end) as `root;...;leaf bytes` for flamegraph.pl, inferno or\n"
    "speedscope (stdout, or -o OUT)",
    Operands::kOneTrace, kFlagOutput | kFlagLeaks | kFlagScope | kFlagPhase, OutputFile::kOptional, Run};

}  // namespace cumemtrace::analyzer
