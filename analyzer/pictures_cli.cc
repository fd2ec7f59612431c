// RunPicturesCommand: analyze, build the report or export, write it. Errors are one line on `err`, and nothing is
// written to the output file when the trace cannot be read.
#include "analyzer/pictures_cli.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analyzer/cli.h"
#include "analyzer/progress.h"
#include "analyzer/model/analysis.h"
#include "analyzer/render/diff_render.h"
#include "analyzer/render/export_folded.h"
#include "analyzer/render/export_perfetto.h"
#include "analyzer/render/export_pprof.h"
#include "analyzer/render/export_torch_snapshot.h"
#include "analyzer/render/gzip.h"
#include "analyzer/render/html_data.h"
#include "analyzer/render/html_report.h"
#include "analyzer/render/text_common.h"
#include "analyzer/model/history.h"
#include "analyzer/reports/check.h"
#include "analyzer/reports/diff_report.h"
#include "analyzer/reports/stack_weights.h"
#include "analyzer/reports/torch_snapshot.h"

namespace cumemtrace::analyzer {
namespace {

constexpr char kTool[] = "cumem-analyze";
// Groups kept per snapshot where a command needs them all (diff matches every group; exports draw every stack).
constexpr size_t kAllGroups = size_t{1} << 20;

void Write(const std::string& text, std::FILE* f) { std::fwrite(text.data(), 1, text.size(), f); }

int Fail(const absl::Status& status, std::FILE* err, int code) {
  Write(absl::StrCat(kTool, ": ", status.message(), "\n"), err);
  return code;
}

void Warn(const TraceInfo& info, std::FILE* err) {
  const std::string warning = TraceWarning(info);
  if (!warning.empty()) Write(warning + "\n", err);
}

// Writes `bytes` to `path` (replacing it), or to `out` when `path` is empty.
absl::Status WriteOutput(const std::string& path, const std::string& bytes, std::FILE* out) {
  if (path.empty()) {
    Write(bytes, out);
    std::fflush(out);
    return absl::OkStatus();
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot write ", path));
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok) return absl::DataLossError(absl::StrCat("cannot write all of ", path));
  return absl::OkStatus();
}

// The model as the exports need it: every stack its own group, none dropped.
absl::StatusOr<std::unique_ptr<Analysis>> AnalyzeForExport(const CommandLine& cl, bool pinned, std::FILE* err,
                                                            ProgressBar* progress = nullptr) {
  AnalyzeOptions options;
  if (progress != nullptr) options.progress = progress->EventsCallback();
  options.peak_snapshots = true;
  options.oom_snapshots = cl.command == Command::kHtml;
  options.pinned = pinned;
  options.max_groups = kAllGroups;
  options.grouping = GroupingOptions{GroupBy::kStack, ""};
  options.phase_filter = cl.phase_filter;  // folded/pprof/html/perfetto at the peaks inside --phase / --window
  absl::StatusOr<std::unique_ptr<Analysis>> a = Analyze(cl.trace, options);
  if (progress != nullptr) progress->Done();
  if (a.ok()) Warn((*a)->info, err);
  return a;
}

int RunFoldedCommand(const CommandLine& cl, std::FILE* out, std::FILE* err) {
  absl::StatusOr<std::unique_ptr<Analysis>> analysis = AnalyzeForExport(cl, false, err);
  if (!analysis.ok()) return Fail(analysis.status(), err, kExitBadInput);
  const Analysis& a = **analysis;
  FrameResolver resolver(a.stacks, a.symbols, a.python_frames);
  const std::vector<WeightedStack> stacks = cl.leaks ? LeakStacks(a, cl.bounds) : PeakStacks(a, cl.bounds);
  if (absl::Status s = WriteOutput(cl.output, FoldedStacks(stacks, resolver), out); !s.ok()) {
    return Fail(s, err, kExitBadInput);
  }
  return kExitOk;
}

std::string Title(const Analysis& a) {
  std::string title;
  for (const std::string& arg : a.info.header.argv) absl::StrAppend(&title, title.empty() ? "" : " ", arg);
  return title.empty() ? a.info.path : title;
}

int RunHtmlCommand(const CommandLine& cl, std::FILE* err) {
  ProgressBar progress(err, absl::StrCat("reading ", cl.trace));
  absl::StatusOr<std::unique_ptr<Analysis>> analysis = AnalyzeForExport(cl, true, err, &progress);
  if (!analysis.ok()) return Fail(analysis.status(), err, kExitBadInput);
  const Analysis& a = **analysis;
  HistoryOptions history_options;
  progress.SetLabel("timelines");
  history_options.progress = progress.FractionCallback(a.model.events);
  absl::StatusOr<History> history = ReadHistory(a, history_options);
  progress.Done();
  if (!history.ok()) return Fail(history.status(), err, kExitBadInput);
  HtmlDataOptions options;
  options.grouping = cl.grouping;
  const std::string page = HtmlReport(Title(a), HtmlData(a, *history, options));
  if (absl::Status s = WriteOutput(cl.output, page, nullptr); !s.ok()) return Fail(s, err, kExitBadInput);
  return kExitOk;
}

// pprof and perfetto: the model, then memory over time (allocation totals, counters).
int RunProfileCommand(const CommandLine& cl, std::FILE* err) {
  ProgressBar progress(err, absl::StrCat("reading ", cl.trace));
  absl::StatusOr<std::unique_ptr<Analysis>> analysis = AnalyzeForExport(cl, false, err, &progress);
  if (!analysis.ok()) return Fail(analysis.status(), err, kExitBadInput);
  const Analysis& a = **analysis;
  HistoryOptions history_options;
  history_options.moments = 0;
  if (cl.command == Command::kPerfetto) history_options.buckets = 10000;
  progress.SetLabel("timelines");
  history_options.progress = progress.FractionCallback(a.model.events);
  absl::StatusOr<History> history = ReadHistory(a, history_options);
  progress.Done();
  if (!history.ok()) return Fail(history.status(), err, kExitBadInput);
  std::string bytes;
  if (cl.command == Command::kPprof) {
    bytes = Gzip(PprofProfile(a, *history, cl.leaks ? LeakStacks(a, cl.bounds) : PeakStacks(a, cl.bounds)));
  } else {
    bytes = PerfettoTrace(a, *history);
  }
  if (absl::Status s = WriteOutput(cl.output, bytes, nullptr); !s.ok()) return Fail(s, err, kExitBadInput);
  return kExitOk;
}

// PyTorch's snapshot format has no place to say that a block's size is an estimate: stderr says it.
std::string SnapshotEstimateWarning(const SnapshotEstimates& e) {
  if (!e.any()) return "";
  std::vector<std::string> why;
  if (e.estimated_blocks != 0) {
    why.push_back(Plural(e.estimated_blocks, "active block estimated", "active blocks estimated"));
  }
  if (e.mismatches != 0) {
    why.push_back(Plural(e.mismatches, "event the layout disagreed with", "events the layout disagreed with"));
  }
  if (!e.unmodelled.empty()) {
    std::vector<std::string> settings;
    for (const std::string& setting : e.unmodelled) settings.push_back(Printable(setting));
    why.push_back(absl::StrCat("settings not modelled: ", absl::StrJoin(settings, ", ")));
  }
  if (e.attached_late) why.push_back("tracker attached after the allocator's first segment");
  return absl::StrCat("warning: block sizes in the snapshot's segments are estimates (", absl::StrJoin(why, "; "),
                      ")\n");
}

// torch-snapshot: its own read of the trace (the torch.* events and stacks, the allocator layer); no Analysis.
int RunTorchSnapshotCommand(const CommandLine& cl, std::FILE* err) {
  absl::StatusOr<std::unique_ptr<TorchSnapshot>> snapshot = BuildTorchSnapshot(cl.trace);
  if (!snapshot.ok()) return Fail(snapshot.status(), err, kExitBadInput);
  const TorchSnapshot& s = **snapshot;
  Warn(s.info, err);
  if (s.unmatched_frees != 0 || s.stray_blocks != 0) {
    Write(absl::StrCat("warning: left out of the snapshot: ", s.unmatched_frees,
                       " frees of blocks never allocated in the trace, ", s.stray_blocks,
                       " live blocks outside every segment\n"),
          err);
  }
  if (s.foreign_device_events != 0) {
    Write(absl::StrCat("warning: left out of the snapshot: ", s.foreign_device_events,
                       " PyTorch allocator events of devices above ", kMaxTorchDevice,
                       " (PyTorch's largest device index; the trace is damaged)\n"),
          err);
  }
  Write(SnapshotEstimateWarning(s.estimates), err);
  const std::string bytes = cl.json ? TorchSnapshotJson(s) : TorchSnapshotPickle(s);
  if (absl::Status st = WriteOutput(cl.output, bytes, nullptr); !st.ok()) return Fail(st, err, kExitBadInput);
  return kExitOk;
}

int RunCheckCommand(const CommandLine& cl, std::FILE* out, std::FILE* err) {
  AnalyzeOptions options;
  options.peak_snapshots = cl.bounds.max_peak.has_value();
  options.oom_snapshots = false;
  options.pinned = false;
  options.max_groups = 1;
  options.grouping = cl.grouping;
  options.phase_filter = cl.phase_filter;  // check --phase validate --max-peak 8GiB
  absl::StatusOr<std::unique_ptr<Analysis>> analysis = Analyze(cl.trace, options);
  if (!analysis.ok()) return Fail(analysis.status(), err, kExitUsage);
  const Analysis& a = **analysis;
  Warn(a.info, err);
  FrameResolver resolver(a.stacks, a.symbols, a.python_frames);
  const CheckVerdict verdict = RunCheck(a, cl.bounds, resolver);
  Write(verdict.line + "\n", out);
  std::fflush(out);
  return verdict.passed ? kExitOk : kExitCheckFailed;
}

int RunDiffCommand(const CommandLine& cl, std::FILE* out, std::FILE* err) {
  AnalyzeOptions options;
  options.oom_snapshots = false;
  options.pinned = false;
  options.max_groups = kAllGroups;
  options.grouping = cl.grouping;
  absl::StatusOr<std::unique_ptr<Analysis>> a = Analyze(cl.trace, options);
  if (!a.ok()) return Fail(a.status(), err, kExitBadInput);
  absl::StatusOr<std::unique_ptr<Analysis>> b = Analyze(cl.second_trace, options);
  if (!b.ok()) return Fail(b.status(), err, kExitBadInput);
  Warn((*a)->info, err);
  Warn((*b)->info, err);
  FrameResolver a_resolver((*a)->stacks, (*a)->symbols, (*a)->python_frames);
  FrameResolver b_resolver((*b)->stacks, (*b)->symbols, (*b)->python_frames);
  ReportOptions r;
  r.top = cl.top;
  r.frames = cl.frames.value_or(cl.json ? 64 : 8);
  const DiffReport report = BuildDiffReport(**a, a_resolver, **b, b_resolver, r);
  const DiffHeading heading{cl.trace, cl.second_trace, GroupingName(cl.grouping), r.frames};
  Write(cl.json ? DiffJson(heading, report) : DiffText(heading, report), out);
  std::fflush(out);
  return kExitOk;
}

}  // namespace

bool IsPicturesCommand(Command command) {
  switch (command) {
    case Command::kCheck:
    case Command::kDiff:
    case Command::kFolded:
    case Command::kHtml:
    case Command::kPprof:
    case Command::kPerfetto:
    case Command::kTorchSnapshot: return true;
    default: return false;
  }
}

int RunPicturesCommand(const CommandLine& cl, std::FILE* out, std::FILE* err) {
  switch (cl.command) {
    case Command::kCheck: return RunCheckCommand(cl, out, err);
    case Command::kDiff: return RunDiffCommand(cl, out, err);
    case Command::kFolded: return RunFoldedCommand(cl, out, err);
    case Command::kHtml: return RunHtmlCommand(cl, err);
    case Command::kPprof:
    case Command::kPerfetto: return RunProfileCommand(cl, err);
    case Command::kTorchSnapshot: return RunTorchSnapshotCommand(cl, err);
    default:
      return Fail(absl::UnimplementedError(absl::StrCat(cl.command_name, " is not built yet")), err, kExitUsage);
  }
}

}  // namespace cumemtrace::analyzer
