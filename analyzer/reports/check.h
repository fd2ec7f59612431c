// `cumem-analyze check`: a CI gate. A test suite runs its program under cumemtrace and fails the build when the
// trace breaks a bound on memory: a peak over --max-peak, more than --max-leak still live at the end, or any
// failed allocation (--no-oom). The bounds are tested in a fixed order (peak, leak, failed allocations); the first
// broken one is the verdict, with where (device, kind, time) and who (the largest group), so that a CI log says
// what to look at without opening the trace. It reads only the model; render/text/check_text.h words it.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_CHECK_H_
#define CUMEMTRACE_ANALYZER_REPORTS_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>

#include "analyzer/model/analysis.h"
#include "analyzer/model/stacks/frame_resolver.h"
#include "analyzer/reports/check_bounds.h"
#include "analyzer/reports/report_common.h"

namespace cumemtrace::analyzer {

// Who held the memory a verdict is about: a group's label, or only its stack id when the trace cannot group.
struct CheckCulprit {
  uint64_t stack = 0;
  std::optional<GroupLabel> label;
  uint64_t bytes = 0;
};

struct PeakCheck {
  uint64_t bound = 0;
  uint64_t highest = 0;  // the highest peak of the timelines checked
  int timelines = 0;
  // Set when a peak is over the bound: the first such timeline.
  bool broken = false;
  int32_t device = 0;
  int series = 0;
  uint64_t peak_bytes = 0;
  int64_t peak_time_ns = 0;                // relative to the trace's start
  std::optional<CheckCulprit> largest;     // the largest group at that peak
};

struct LeakCheck {
  uint64_t bound = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  bool broken = false;
  // When broken: the largest group still live (its device and kind too).
  std::optional<CheckCulprit> largest;
  int32_t largest_device = 0;
  format::Kind largest_kind = format::Kind::kUnknown;
};

struct OomCheck {
  uint64_t failures = 0;
  const Event* first = nullptr;  // the first failure kept, in scope (points into the Analysis)
  int64_t first_time_ns = 0;     // relative to the trace's start
  std::optional<CheckCulprit> first_from;
};

struct CheckReport {
  bool passed = true;
  // The bounds checked, up to the first broken one (those after it are not tested).
  std::optional<PeakCheck> peak;
  std::optional<LeakCheck> leak;
  std::optional<OomCheck> oom;
};

CheckReport BuildCheckReport(const Analysis& analysis, const CheckBounds& bounds, FrameResolver& resolver);

// The series named `name` ("device", "pinned_host", ..., "total"); nullopt when none is.
std::optional<int> SeriesByName(const std::string& name);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_CHECK_H_
