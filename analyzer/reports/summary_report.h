// The summary report (the default): the process and its devices, each device's and kind's peak with what was
// live then, leaks, failed allocations, pinned memory spikes, and the tool's health. It is the other reports put
// together, with fewer lines each.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_SUMMARY_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_SUMMARY_REPORT_H_

#include "analyzer/reports/leak_report.h"
#include "analyzer/reports/oom_report.h"
#include "analyzer/reports/peak_report.h"
#include "analyzer/reports/pinned_report.h"
#include "analyzer/reports/report_common.h"

namespace cumemtrace::analyzer {

struct SummaryReport {
  PeakReport peak;
  LeakReport leaks;
  OomReport ooms;
  PinnedReport pinned;
};

SummaryReport BuildSummaryReport(const Analysis& analysis, const ReportOptions& options, FrameResolver& resolver);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_SUMMARY_REPORT_H_
