// `cumem-analyze html TRACE.pb -o OUT`: one self-contained HTML page.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "analyzer/commands/analyze_step.h"
#include "analyzer/commands/command.h"
#include "analyzer/commands/oom_replays.h"
#include "analyzer/commands/timeline_export.h"
#include "analyzer/export/html_data.h"
#include "analyzer/export/allocator_map_json.h"
#include "analyzer/export/html_report.h"
#include "analyzer/model/torch/allocator_map.h"
#include "analyzer/model/stacks/frame_resolver.h"
#include "analyzer/render/text/text_reports.h"
#include "analyzer/reports/leak_report.h"
#include "analyzer/reports/oom_report.h"
#include "analyzer/reports/torch_report.h"

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kHtmlDiagnosisFrames = 5;
constexpr size_t kHtmlMapBlocks = 5000;  // blocks drawn in the block map at the OOM (whole segments, largest first)

// The page's title: the traced command line, else the trace's path.
std::string Title(const Analysis& a) {
  std::string title;
  for (const std::string& arg : a.info.header.argv) absl::StrAppend(&title, title.empty() ? "" : " ", arg);
  return title.empty() ? a.info.path : title;
}

int Run(const CommandLine& cl, Console& console) {
  AnalyzeOptions needs = ExportNeeds(cl);
  needs.oom_snapshots = true;  // what was live at each failed allocation
  needs.pinned = true;         // the pinned spikes' panel
  absl::StatusOr<ModelAndHistory> m = AnalyzeWithHistory(cl, needs, HistoryOptions{}, console);
  if (!m.ok()) return console.Error(m.status());
  PageOptions options;
  options.grouping = cl.grouping;
  const Analysis& a = *m->analysis;
  // The diagnosis the summary opens with, first on the page (its groups are stacks: the page's model keeps one group
  // per stack, and its tables regroup them).
  FrameResolver resolver(a.stacks, a.symbols, a.python_frames);
  const ReportOptions report_options = ReportOptionsFor(cl, kHtmlDiagnosisFrames);
  OomReport ooms = BuildOomReport(a, report_options, resolver);
  AddOomReplays(cl, &ooms);
  const LeakReport leaks = BuildLeakReport(a, report_options, resolver);
  HtmlExtras extras;
  const std::vector<TorchPeakSection> torch_peaks = BuildTorchPeaks(a, report_options, resolver);
  extras.diagnosis =
      absl::StrSplit(DiagnosisText(ooms, leaks, a.phases, torch_peaks), '\n', absl::SkipEmpty());
  // PyTorch's segments and blocks at its last OOM, after it released what cache it could: the holes left.
  if (!ooms.torch_ooms.empty()) {
    const TorchOomEntry& last = ooms.torch_ooms.back();
    absl::StatusOr<AllocatorMap> map = AllocatorMapAt(cl.trace, last.device, last.seq);
    if (map.ok()) {
      extras.allocator_json = AllocatorMapJson(*map, last.device, last.verdict.request_bytes, kHtmlMapBlocks);
    }
  }
  const PageReport page = BuildPageReport(a, m->history, options);
  return console.WriteOutput(cl.output, HtmlReport(Title(a), HtmlData(page, extras)));
}

}  // namespace

extern const CommandSpec kHtmlCommand = {
    "html", "TRACE.pb -o OUT [--group-by HOW] [--phase NAME|--window A:B]",
    "one self-contained HTML page (no network): memory over time by owner, the peak and failed allocations\n"
    "marked, what was live at a selected moment as a flamegraph and a table, leaks, pinned spikes, owners, the\n"
    "driver's view and the tool's health",
    Operands::kOneTrace, kFlagOutput | kFlagGroupBy | kFlagPhase, OutputFile::kRequired, Run};

}  // namespace cumemtrace::analyzer
