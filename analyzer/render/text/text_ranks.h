// The ranks report as text: one row per (rank, device), then the spread of device peaks.
#ifndef CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_RANKS_H_
#define CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_RANKS_H_

#include <string>

#include "analyzer/reports/ranks_report.h"

namespace cumemtrace::analyzer {

std::string RanksText(const RanksReport& report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_RANKS_H_
