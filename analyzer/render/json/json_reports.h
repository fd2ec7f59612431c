// Each report as one JSON object (docs/json.md is the reference for every name). Each returns the whole document,
// ending in a newline. Every document carries the overview (process, devices, threads, health) and its report's
// keys; the summary carries all of them.
#ifndef CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_REPORTS_H_
#define CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_REPORTS_H_

#include <string>

#include "analyzer/reports/leak_report.h"
#include "analyzer/reports/oom_report.h"
#include "analyzer/reports/peak_report.h"
#include "analyzer/reports/pinned_report.h"
#include "analyzer/reports/summary_report.h"

namespace cumemtrace::analyzer {

std::string SummaryJson(const Overview& overview, const SummaryReport& report);
std::string PeakJson(const Overview& overview, const PeakReport& report);
std::string LeaksJson(const Overview& overview, const LeakReport& report);
std::string OomJson(const Overview& overview, const OomReport& report);
std::string PinnedJson(const Overview& overview, const PinnedReport& report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_REPORTS_H_
