// `cumem-analyze pprof TRACE.pb -o OUT`: a gzipped pprof heap profile.
#include "analyzer/commands/command.h"
#include "analyzer/commands/timeline_export.h"
#include "analyzer/export/export_pprof.h"
#include "analyzer/export/gzip.h"
#include "analyzer/reports/stack_weights.h"

namespace cumemtrace::analyzer {
namespace {

int Run(const CommandLine& cl, Console& console) {
  HistoryOptions history;
  history.moments = 0;  // allocation totals per stack only
  absl::StatusOr<ModelAndHistory> m = AnalyzeWithHistory(cl, ExportNeeds(cl), history, console);
  if (!m.ok()) return console.Error(m.status());
  const Analysis& a = *m->analysis;
  const std::vector<WeightedStack> inuse = cl.leaks ? LeakStacks(a, cl.bounds) : PeakStacks(a, cl.bounds);
  return console.WriteOutput(cl.output, Gzip(PprofProfile(BuildProfileReport(a, m->history, inuse))));
}

}  // namespace

extern const CommandSpec kPprofCommand = {
    "pprof", "TRACE.pb -o OUT [--leaks] [--device N|host] [--kind K] [--phase NAME|--window A:B]",
    "a gzipped pprof profile (go tool pprof, speedscope): inuse_space/inuse_objects of the stacks live at each\n"
    "peak (or at the end with --leaks) and alloc_space/alloc_objects over the whole trace",
    Operands::kOneTrace, kFlagOutput | kFlagLeaks | kFlagScope | kFlagPhase, OutputFile::kRequired, Run};

}  // namespace cumemtrace::analyzer
