// Stacks weighted by memory, as the pprof export writes them: every successful allocation over the trace per stack
// (counts and bytes), and the stacks live at each peak (or at the end, for leaks) with a "timeline" label. Frames are
// resolved here; export/export_pprof.cc only interns them into pprof's tables.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_PROFILE_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_PROFILE_REPORT_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/analysis.h"
#include "analyzer/model/memory/history.h"
#include "analyzer/model/stacks/frame_resolver.h"
#include "analyzer/reports/stack_weights.h"

namespace cumemtrace::analyzer {

struct ProfileSample {
  size_t stack = 0;  // index into ProfileReport::stacks
  // alloc_objects, alloc_space, inuse_objects, inuse_space.
  std::array<int64_t, 4> values{};
  std::string timeline;  // in-use samples: the moment's timeline ("device 0 total"); "" for allocation totals
};

struct ProfileReport {
  std::string path;              // the trace
  int64_t start_unix_time_ns = 0;
  int64_t duration_ns = 0;
  std::vector<std::vector<Frame>> stacks;  // each innermost first
  // Allocation totals, one per stack in stack id order; then the in-use stacks in the order given.
  std::vector<ProfileSample> samples;
};

ProfileReport BuildProfileReport(const Analysis& analysis, const History& history,
                                 const std::vector<WeightedStack>& inuse);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_PROFILE_REPORT_H_
