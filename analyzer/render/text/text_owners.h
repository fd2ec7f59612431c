// The summary's owner and driver sections as text: memory by owner per device, and one line per GPU saying how
// much of what the driver reports used the trace explains.
#ifndef CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_OWNERS_H_
#define CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_OWNERS_H_

#include <string>

#include "analyzer/reports/summary_report.h"

namespace cumemtrace::analyzer {

// Appends the "Memory by owner" table (or a line saying there is nothing) and a blank line.
void AppendOwnersText(const SummaryReport& report, std::string* out);
// Appends the driver lines (or one saying the trace has no samples) and a blank line.
void AppendDriverMemoryText(const SummaryReport& report, std::string* out);
// "12.0 MiB", "-3.0 KiB".
std::string SignedBytes(int64_t bytes);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_OWNERS_H_
