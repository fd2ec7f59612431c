// `cumem-analyze check`: a CI gate. A test suite runs its program under cumemtrace and fails the build when the
// trace breaks a bound on memory: a peak over --max-peak, more than --max-leak still live at the end, or any
// failed allocation (--no-oom). The verdict is one line that names the broken bound, where (device, kind, time)
// and who (the largest group), so a CI log says what to look at without opening the trace.
// It reads only the model; it must never print (cli.cc does) nor decide exit codes.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_CHECK_H_
#define CUMEMTRACE_ANALYZER_REPORTS_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>

#include "analyzer/model/analysis.h"
#include "analyzer/model/frame_resolver.h"
#include "analyzer/reports/check_bounds.h"

namespace cumemtrace::analyzer {

struct CheckVerdict {
  bool passed = true;
  std::string line;  // "check passed: ..." or "check failed: ...", no newline
};

CheckVerdict RunCheck(const Analysis& analysis, const CheckBounds& bounds, FrameResolver& resolver);

// The series named `name` ("device", "pinned_host", ..., "total"); nullopt when none is.
std::optional<int> SeriesByName(const std::string& name);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_CHECK_H_
