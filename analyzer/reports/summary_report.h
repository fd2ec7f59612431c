// The summary report (the default): the process and its devices, each device's and kind's peak with what was
// live then, leaks, failed allocations, pinned memory spikes, memory by owner (which library allocated it), the
// driver's view of each device against the trace's, and the tool's health. It is the other reports put together,
// with fewer lines each.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_SUMMARY_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_SUMMARY_REPORT_H_

#include <vector>

#include "analyzer/model/usage/driver_memory.h"
#include "analyzer/model/usage/owners.h"
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
  // By device ordinal (host -1 first), then the largest owner first (owners.h: OwnerTracker::Results).
  std::vector<OwnerUsage> owners;
  // One per GPU with MemorySample packets, by ordinal; empty when the trace has none.
  std::vector<DriverMemory> driver_memory;
  uint64_t memory_samples_in_trailer = 0;  // what the tool says it wrote (0 without a trailer)
};

SummaryReport BuildSummaryReport(const Analysis& analysis, const ReportOptions& options, FrameResolver& resolver);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_SUMMARY_REPORT_H_
