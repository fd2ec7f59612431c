// The summary: every other report, built once.
#include "analyzer/reports/summary_report.h"

namespace cumemtrace::analyzer {

SummaryReport BuildSummaryReport(const Analysis& a, const ReportOptions& options, FrameResolver& resolver) {
  SummaryReport r;
  r.peak = BuildPeakReport(a, options, resolver);
  r.leaks = BuildLeakReport(a, options, resolver);
  r.ooms = BuildOomReport(a, options, resolver);
  r.pinned = BuildPinnedReport(a, options, resolver);
  return r;
}

}  // namespace cumemtrace::analyzer
