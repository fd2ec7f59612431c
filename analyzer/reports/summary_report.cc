// The summary: every other report, built once.
#include "analyzer/reports/summary_report.h"

namespace cumemtrace::analyzer {

SummaryReport BuildSummaryReport(const Analysis& a, const ReportOptions& options, FrameResolver& resolver) {
  SummaryReport r;
  r.peak = BuildPeakReport(a, options, resolver);
  r.leaks = BuildLeakReport(a, options, resolver);
  r.ooms = BuildOomReport(a, options, resolver);
  r.pinned = BuildPinnedReport(a, options, resolver);
  r.owners = a.owners;
  r.driver_memory = a.driver_memory;
  r.memory_samples_in_trailer = a.info.has_trailer ? a.info.trailer.memory_samples : 0;
  return r;
}

}  // namespace cumemtrace::analyzer
