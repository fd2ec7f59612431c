// The leak report: allocations still live at the end of the trace, grouped by (device, kind, group: see
// --group-by), largest first, each with how its bytes grew over the trace, with totals per (device, kind). Totals of memory leave out address_reserve (address space) and
// vmm_mapped (a view of vmm_physical memory), which are listed but never summed into memory.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_LEAK_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_LEAK_REPORT_H_

#include <array>
#include <cstdint>
#include <vector>

#include "analyzer/reports/report_common.h"

namespace cumemtrace::analyzer {

struct LeakEntry {
  int32_t device = 0;
  const char* kind = "";
  uint64_t bytes = 0;
  uint64_t count = 0;
  uint64_t stack_id = 0;  // the group's largest stack
  std::vector<Frame> frames;
  GroupLabel label;
  std::array<uint64_t, kGrowthPoints> growth{};  // see LeakGroup::growth
  std::string phase;  // the phase its allocations were made in (LeakGroup::phase), "" for none
};

struct LeakReport {
  std::vector<LeakEntry> top;          // the largest `top` groups
  std::vector<LeakTotal> totals;       // per (device, kind)
  uint64_t memory_bytes = 0;           // live memory at the end (memory kinds only)
  uint64_t memory_count = 0;
  uint64_t group_count = 0;            // all groups
  bool clean_end = false;              // the trace has a trailer: "live at the end" means "never freed"
};

LeakReport BuildLeakReport(const Analysis& analysis, const ReportOptions& options, FrameResolver& resolver);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_LEAK_REPORT_H_
