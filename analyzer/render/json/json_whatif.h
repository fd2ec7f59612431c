// The what-if report as JSON (docs/json.md, "whatif"): "oom" and "reserved_peak" at the top level, null when
// nothing is claimed.
#ifndef CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_WHATIF_H_
#define CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_WHATIF_H_

#include <string>

#include "analyzer/reports/whatif_report.h"

namespace cumemtrace::analyzer {

std::string WhatIfJson(const WhatIfReport& report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_WHATIF_H_
