// The pinned report: live pinned host memory over time (pinned_host of every device summed; the preload records
// it on the host, device -1), its peak, and the spikes: the windows where it rose the most, each with the thread
// and stack that allocated the most pinned memory inside it.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_PINNED_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_PINNED_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/reports/report_common.h"

namespace cumemtrace::analyzer {

struct PinnedSpike {
  int64_t start_ns = 0;  // relative
  int64_t end_ns = 0;
  uint64_t rise_bytes = 0;
  uint64_t start_bytes = 0;
  uint64_t max_bytes = 0;
  uint64_t window_allocated_bytes = 0;  // pinned bytes allocated in the window, by anyone
  uint64_t window_allocations = 0;
  uint32_t thread = 0;                  // the thread and stack that allocated the most in the window
  std::string thread_name;
  uint64_t stack_id = 0;
  uint64_t allocated_bytes = 0;         // by that thread and group of stacks
  std::vector<Frame> stack;             // of the group's largest stack
  StackView view;
  GroupLabel label;
};

struct PinnedReport {
  bool computed = false;
  uint64_t peak_bytes = 0;
  int64_t peak_time_ns = 0;
  uint64_t final_bytes = 0;
  uint64_t allocations = 0;
  uint64_t allocated_bytes = 0;
  int64_t window_ns = 0;
  std::vector<PinnedSpike> spikes;      // largest rise first, at most `top`
  std::vector<TimelinePoint> timeline;  // PinnedTracker::kTimelinePoints points
};

PinnedReport BuildPinnedReport(const Analysis& analysis, const ReportOptions& options, FrameResolver& resolver);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_PINNED_REPORT_H_
