// The stacks an export draws, each with its bytes: live at each peak, or live at the end (--leaks), one entry per
// (timeline, stack), with the timeline as a root frame ("device 0 total") so that one flamegraph holds every
// device without mixing moments that never coexisted. Folded stacks, pprof and the HTML report read this; it reads
// only the model (analyzed with GroupBy::kStack, so that groups are single stacks, and no cap on groups).
#ifndef CUMEMTRACE_ANALYZER_REPORTS_STACK_WEIGHTS_H_
#define CUMEMTRACE_ANALYZER_REPORTS_STACK_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/analysis.h"
#include "analyzer/reports/check_bounds.h"

namespace cumemtrace::analyzer {

struct WeightedStack {
  std::string root;  // "device 0 total", "host pinned_host"
  int32_t device = 0;
  int series = 0;
  uint64_t stack = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
};

// Which timelines: `scope.device` and `scope.series` when set; else every device total and host memory kind
// (peaks), or every memory kind (leaks).
std::vector<WeightedStack> PeakStacks(const Analysis& analysis, const CheckBounds& scope);
std::vector<WeightedStack> LeakStacks(const Analysis& analysis, const CheckBounds& scope);

// "device 0 total", "host pinned_host".
std::string TimelineName(int32_t device, int series);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_STACK_WEIGHTS_H_
