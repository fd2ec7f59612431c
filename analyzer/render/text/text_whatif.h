// The what-if report as text: the verdict first, then how far the replay was checked.
#ifndef CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_WHATIF_H_
#define CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_WHATIF_H_

#include <string>

#include "analyzer/reports/whatif_report.h"

namespace cumemtrace::analyzer {

std::string WhatIfText(const WhatIfReport& report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_WHATIF_H_
