// `cumem-analyze diff A.pb B.pb`: what changed between two runs. People compare a run before and after a change
// (or a good and a bad rank) and today do it "with a ruler on the desk" (pytorch issue 120339). The diff matches
// peaks and leaks by (device, kind), and the stack groups live at each device's peak and at the end by their
// symbolic identity (symbolic_frame.h: function, file, line; never addresses, so it works across machines), and
// lists each group's growth or shrink, largest change first. A planted leak in B therefore comes first. Beside the
// bytes live, it compares churn (as heaptrack's diff does): how many allocations each group made over the run and
// their bytes, so a run that makes twice the temporaries of another does not read as "no change".
// It reads only the two models; renderers read only this.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_DIFF_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_DIFF_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/reports/report_common.h"

namespace cumemtrace::analyzer {

struct TotalDiff {
  int32_t device = 0;
  const char* kind = "";  // SeriesName: a memory kind, or "total"
  uint64_t a_bytes = 0;
  uint64_t b_bytes = 0;
  int64_t change() const { return static_cast<int64_t>(b_bytes) - static_cast<int64_t>(a_bytes); }
};

struct GroupDiff {
  int32_t device = 0;
  const char* kind = "";
  std::string identity;  // symbolic key of the group (matches across traces)
  uint64_t a_bytes = 0, a_count = 0;
  uint64_t b_bytes = 0, b_count = 0;
  uint64_t stack_id = 0;  // the largest stack, in B when B has the group, else in A
  bool in_b = false;      // stack_id and frames are B's
  std::vector<Frame> frames;
  GroupLabel label;
  int64_t change() const { return static_cast<int64_t>(b_bytes) - static_cast<int64_t>(a_bytes); }
};

struct DiffReport {
  std::vector<TotalDiff> peaks;        // per (device, series) in either trace
  std::vector<TotalDiff> leak_totals;  // live at the end, per (device, kind)
  std::vector<GroupDiff> leak_groups;  // largest |change| first, at most `top`, unchanged groups left out
  std::vector<GroupDiff> peak_groups;  // live at each device total's (and host memory's) peak
  uint64_t leak_group_count = 0;       // changed groups before the cap
  uint64_t peak_group_count = 0;
  // Allocations made over the run: per (device, kind) and per group (a/b_count: allocations, a/b_bytes: their
  // bytes summed), largest change in bytes first.
  std::vector<TotalDiff> churn_totals;
  std::vector<uint64_t> churn_total_a_counts, churn_total_b_counts;  // beside churn_totals
  std::vector<GroupDiff> churn_groups;
  uint64_t churn_group_count = 0;
};

// `a` and `b` analyzed with peak snapshots and allocation totals, no cap worth speaking of on groups
// (AnalyzeOptions::max_groups), and the same grouping; each has its own resolver.
DiffReport BuildDiffReport(const Analysis& a, FrameResolver& a_resolver, const Analysis& b,
                           FrameResolver& b_resolver, const ReportOptions& options);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_DIFF_REPORT_H_
