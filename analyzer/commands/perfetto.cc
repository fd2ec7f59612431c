// `cumem-analyze perfetto TRACE.pb -o OUT`: memory over time as a Perfetto trace.
#include "analyzer/commands/command.h"
#include "analyzer/commands/timeline_export.h"
#include "analyzer/export/export_perfetto.h"

namespace cumemtrace::analyzer {
namespace {

// Counter points per track: enough for a zoomed-in view, small enough for the UI.
constexpr int kPerfettoBuckets = 10000;

int Run(const CommandLine& cl, Console& console) {
  HistoryOptions history;
  history.moments = 0;
  history.buckets = kPerfettoBuckets;
  absl::StatusOr<ModelAndHistory> m = AnalyzeWithHistory(cl, ExportNeeds(cl), history, console);
  if (!m.ok()) return console.Error(m.status());
  return console.WriteOutput(cl.output, PerfettoTrace(BuildTimelineReport(*m->analysis, m->history)));
}

}  // namespace

extern const CommandSpec kPerfettoCommand = {
    "perfetto", "TRACE.pb -o OUT [--phase NAME|--window A:B]",
    "memory over time as a Perfetto trace (ui.perfetto.dev): a counter track per device and kind, an instant\n"
    "event per failed allocation",
    Operands::kOneTrace, kFlagOutput | kFlagPhase, OutputFile::kRequired, Run};

}  // namespace cumemtrace::analyzer
