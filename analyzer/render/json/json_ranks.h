// The ranks report as one JSON document (docs/json.md, "ranks").
#ifndef CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_RANKS_H_
#define CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_RANKS_H_

#include <string>

#include "analyzer/reports/ranks_report.h"

namespace cumemtrace::analyzer {

// The whole document, ending in a newline.
std::string RanksJson(const RanksReport& report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_RANKS_H_
