// check's verdict as the one line a CI log shows: "check passed: ..." or "check failed: ...", no newline.
#ifndef CUMEMTRACE_ANALYZER_RENDER_TEXT_CHECK_TEXT_H_
#define CUMEMTRACE_ANALYZER_RENDER_TEXT_CHECK_TEXT_H_

#include <string>

#include "analyzer/reports/check.h"

namespace cumemtrace::analyzer {

std::string CheckLine(const CheckReport& report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_TEXT_CHECK_TEXT_H_
