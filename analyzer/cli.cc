// RunCli: from arguments to exit status. Chooses what the model must compute for the subcommand, builds the
// report, renders it. It must never print a partial report for unreadable input: errors are one line on `err`.
#include "analyzer/cli.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "analyzer/command_line.h"
#include "analyzer/model/analysis.h"
#include "analyzer/pictures_cli.h"
#include "analyzer/progress.h"
#include "analyzer/render/json_events.h"
#include "analyzer/render/json_ranks.h"
#include "analyzer/render/json_reports.h"
#include "analyzer/render/output.h"
#include "analyzer/render/text_events.h"
#include "analyzer/render/text_ranks.h"
#include "analyzer/render/text_reports.h"
#include "analyzer/reports/events_report.h"
#include "analyzer/reports/ranks_report.h"
#include "analyzer/reports/summary_report.h"
#include "analyzer/tools/redact_command.h"
#include "analyzer/tools/symbolize_command.h"

#ifndef CUMEMTRACE_VERSION
#define CUMEMTRACE_VERSION "unknown"
#endif

namespace cumemtrace::analyzer {
namespace {

constexpr char kTool[] = "cumem-analyze";
constexpr size_t kJsonFrames = 64;
constexpr size_t kSummaryTextGroups = 5;

size_t DefaultTextFrames(Command command) {
  switch (command) {
    case Command::kSummary: return 5;
    case Command::kPeak:
    case Command::kOom: return 12;
    default: return 8;
  }
}

AnalyzeOptions OptionsFor(const CommandLine& cl) {
  AnalyzeOptions o;
  o.max_groups = std::max<size_t>(cl.top, 1);
  o.peak_snapshots = cl.command == Command::kSummary || cl.command == Command::kPeak;
  o.oom_snapshots = cl.command == Command::kSummary || cl.command == Command::kOom;
  o.pinned = cl.command == Command::kSummary || cl.command == Command::kPinned;
  o.grouping = cl.grouping;
  o.phase_filter = cl.phase_filter;
  return o;
}

ReportOptions ReportOptionsFor(const CommandLine& cl) {
  ReportOptions r;
  r.top = cl.top;
  if (!cl.json && cl.command == Command::kSummary && !cl.top_given) r.top = kSummaryTextGroups;
  r.frames = cl.frames.value_or(cl.json ? kJsonFrames : DefaultTextFrames(cl.command));
  return r;
}

void Write(const std::string& text, std::FILE* f) { std::fwrite(text.data(), 1, text.size(), f); }

int Fail(const absl::Status& status, std::FILE* err) {
  Write(absl::StrCat(kTool, ": ", status.message(), "\n"), err);
  return kExitBadInput;
}

void Warn(const TraceInfo& info, std::FILE* err) {
  const std::string warning = TraceWarning(info);
  if (!warning.empty()) Write(warning + "\n", err);
}

int RunEvents(const CommandLine& cl, std::FILE* out, std::FILE* err) {
  TraceInfo info;
  BufferedOutput buffered(out);
  absl::Status status;
  if (cl.json) {
    JsonEventSink sink(buffered);
    status = RunEventsReport(cl.trace, sink, &info);
  } else {
    TextEventSink sink(buffered);
    status = RunEventsReport(cl.trace, sink, &info);
  }
  if (!status.ok()) {
    // Rows already written stay: they are what could be read before the error.
    buffered.Flush();
    return Fail(status, err);
  }
  buffered.Flush();
  Warn(info, err);
  return kExitOk;
}

// symbolize and redact: they write a new trace and say what they did.
int RunTool(const CommandLine& cl, std::FILE* out, std::FILE* err) {
  absl::StatusOr<std::string> report =
      cl.command == Command::kSymbolize
          ? Symbolize(SymbolizeOptions{cl.trace, cl.output, cl.debug_dirs})
          : Redact(RedactOptions{cl.trace, cl.output});
  if (!report.ok()) return Fail(report.status(), err);
  Write(*report, out);
  std::fflush(out);
  return kExitOk;
}

// Every trace is read before anything is printed: one unreadable trace is one line naming it, and no report.
int RunRanks(const CommandLine& cl, std::FILE* out, std::FILE* err) {
  AnalyzeOptions options;
  options.peak_snapshots = options.oom_snapshots = options.pinned = false;
  std::vector<RankEntry> entries;
  for (const std::string& path : cl.traces) {
    absl::StatusOr<std::unique_ptr<Analysis>> analysis = Analyze(path, options);
    if (!analysis.ok()) return Fail(analysis.status(), err);
    Warn((*analysis)->info, err);
    entries.push_back(BuildRankEntry(**analysis));
  }
  const RanksReport report = BuildRanksReport(std::move(entries));
  Write(cl.json ? RanksJson(report) : RanksText(report), out);
  std::fflush(out);
  return kExitOk;
}

std::string Render(const CommandLine& cl, const Analysis& a) {
  FrameResolver resolver(a.stacks, a.symbols, a.python_frames);
  const ReportOptions options = ReportOptionsFor(cl);
  const Overview overview{&a.info, a.model, GroupingName(cl.grouping), a.allocator.attached || a.allocator.events,
                          &a.phases};
  switch (cl.command) {
    case Command::kPeak: {
      PeakReport r = BuildPeakReport(a, options, resolver);
      return cl.json ? PeakJson(overview, r) : PeakText(overview, r);
    }
    case Command::kLeaks: {
      LeakReport r = BuildLeakReport(a, options, resolver);
      return cl.json ? LeaksJson(overview, r) : LeaksText(overview, r);
    }
    case Command::kOom: {
      OomReport r = BuildOomReport(a, options, resolver);
      return cl.json ? OomJson(overview, r) : OomText(overview, r);
    }
    case Command::kPinned: {
      PinnedReport r = BuildPinnedReport(a, options, resolver);
      return cl.json ? PinnedJson(overview, r) : PinnedText(overview, r);
    }
    default: {
      SummaryReport r = BuildSummaryReport(a, options, resolver);
      return cl.json ? SummaryJson(overview, r) : SummaryText(overview, r);
    }
  }
}

}  // namespace

std::string TraceWarning(const TraceInfo& info) {
  std::string out;
  if (info.stats.late_events != 0) {
    absl::StrAppend(&out, "warning: ", info.path, ": ", info.stats.late_events,
                    " events could not be put in order (up to ", info.stats.max_lateness,
                    " sequence numbers late); the report's numbers may be wrong\n");
  }
  if (info.stats.damaged_packets != 0) {
    absl::StrAppend(&out, "warning: ", info.stats.first_damage, "; skipped ", info.stats.damaged_packets,
                    " damaged packets (", info.stats.skipped_bytes,
                    " bytes): what they held is missing from the report\n");
  }
  const NoticeInfo* write_failed = nullptr;
  for (const NoticeInfo& n : info.notices) {
    if (n.code == format::NoticeCode::kWriteFailed) write_failed = &n;
  }
  if (write_failed != nullptr) {
    absl::StrAppend(&out, "warning: ", info.path, " is incomplete: the traced process could not write it (",
                    write_failed->message, "); analyzed the ", info.stats.events, " events before that");
  } else if (info.stats.truncated) {
    absl::StrAppend(&out, "warning: ", info.path, " is cut off at byte ", info.stats.truncated_at,
                    " (the process was killed?); analyzed the ", info.stats.events, " events before it");
  } else if (!info.has_trailer) {
    absl::StrAppend(&out, "warning: ", info.path, " has no trailer: the process did not exit cleanly");
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int RunCli(const std::vector<std::string>& args, std::FILE* out, std::FILE* err) {
  absl::StatusOr<CommandLine> parsed = ParseCommandLine(args);
  if (!parsed.ok()) {
    Write(absl::StrCat(kTool, ": ", parsed.status().message(), " (see ", kTool, " --help)\n"), err);
    return kExitUsage;
  }
  const CommandLine& cl = *parsed;
  if (cl.command == Command::kHelp) {
    Write(UsageText(), out);
    return kExitOk;
  }
  if (cl.command == Command::kVersion) {
    Write(absl::StrCat(kTool, " ", CUMEMTRACE_VERSION, " (reads trace format versions up to ",
                       format::kFormatVersion, ")\n"),
          out);
    return kExitOk;
  }
  if (cl.command == Command::kEvents) return RunEvents(cl, out, err);
  if (cl.command == Command::kSymbolize || cl.command == Command::kRedact) return RunTool(cl, out, err);
  if (cl.command == Command::kRanks) return RunRanks(cl, out, err);
  if (IsPicturesCommand(cl.command)) return RunPicturesCommand(cl, out, err);

  ProgressBar progress(err, absl::StrCat("reading ", cl.trace));
  AnalyzeOptions options = OptionsFor(cl);
  options.progress = progress.EventsCallback();
  absl::StatusOr<std::unique_ptr<Analysis>> analysis = Analyze(cl.trace, options);
  progress.Done();
  if (!analysis.ok()) return Fail(analysis.status(), err);
  Warn((*analysis)->info, err);
  Write(Render(cl, **analysis), out);
  std::fflush(out);
  return kExitOk;
}

}  // namespace cumemtrace::analyzer
