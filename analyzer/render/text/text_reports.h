// Each report as text for people: aligned columns, sizes in KiB/MiB/GiB, times in seconds since the start of the
// trace, stacks innermost frame first. Each returns the whole output. The layout is for reading, not parsing:
// scripts use --json.
#ifndef CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_REPORTS_H_
#define CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_REPORTS_H_

#include <string>

#include "analyzer/reports/leak_report.h"
#include "analyzer/reports/oom_report.h"
#include "analyzer/reports/peak_report.h"
#include "analyzer/reports/pinned_report.h"
#include "analyzer/reports/summary_report.h"

namespace cumemtrace::analyzer {

std::string SummaryText(const Overview& overview, const SummaryReport& report);
// The answer the summary opens with (and the HTML page shows first): the OOM's verdict with the allocator replay's
// answers, the leak, a later phase peaking above the first; one sentence a line.
// Without an OOM in PyTorch's allocator, what autograd kept at a device's tensor peak leads (`torch_peaks`).
std::string DiagnosisText(const OomReport& ooms, const LeakReport& leaks, const PhaseResults& phases,
                          const std::vector<TorchPeakSection>& torch_peaks);
std::string PeakText(const Overview& overview, const PeakReport& report);
std::string LeaksText(const Overview& overview, const LeakReport& report);
std::string OomText(const Overview& overview, const OomReport& report);
std::string PinnedText(const Overview& overview, const PinnedReport& report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_REPORTS_H_
