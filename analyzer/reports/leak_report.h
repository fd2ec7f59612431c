// The leak report: allocations still live at the end of the trace, grouped by (device, kind, group: see
// --group-by), largest first, each with how its bytes grew over the trace, with totals per (device, kind). Totals of memory leave out address_reserve (address space) and
// vmm_mapped (a view of vmm_physical memory), which are listed but never summed into memory.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_LEAK_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_LEAK_REPORT_H_

#include <array>
#include <cstdint>
#include <vector>

#include "analyzer/reports/report_common.h"
#include "analyzer/reports/torch_report.h"

namespace cumemtrace::analyzer {

struct LeakEntry {
  int32_t device = 0;
  const char* kind = "";
  uint64_t bytes = 0;
  uint64_t count = 0;
  uint64_t stack_id = 0;  // the group's largest stack
  std::vector<Frame> frames;
  GroupLabel label;
  StackView view;
  std::array<uint64_t, kGrowthPoints> growth{};  // see LeakGroup::growth
  std::string phase;  // the phase its allocations were made in (LeakGroup::phase), "" for none
  bool pytorch_cache = false;  // see LeakGroup::pytorch_cache
  bool address_space_or_view = false;  // IsAddressSpaceOrView(kind): not memory of its own
};

struct LeakReport {
  std::vector<LeakEntry> top;          // the largest `top` groups
  std::vector<LeakTotal> totals;       // per (device, kind)
  uint64_t memory_bytes = 0;           // live memory at the end (memory kinds only)
  uint64_t memory_count = 0;
  uint64_t group_count = 0;            // all groups
  bool clean_end = false;              // the trace has a trailer: "live at the end" means "never freed"
  // With PyTorch's allocator layer: its tensors live at the end (the leak candidates) apart from the cache it
  // kept (segments still reserved at exit: not a leak).
  TorchLayerSummary torch_layer;
  uint64_t tensor_count = 0;            // live tensors at the end (every device)
  uint64_t tensor_requested_bytes = 0;  // their bytes asked for
  uint64_t tensor_allocated_bytes = 0;  // their extents (allocated_bytes.all.current)
  uint64_t pytorch_reserved_bytes = 0;  // reserved_bytes.all.current at the end
  uint64_t pytorch_cached_bytes = 0;    // reserved - allocated at the end: the cache PyTorch kept
  uint64_t pytorch_cache_driver_bytes = 0;  // live driver memory in groups marked pytorch_cache
  uint64_t pytorch_cache_driver_count = 0;
};

LeakReport BuildLeakReport(const Analysis& analysis, const ReportOptions& options, FrameResolver& resolver);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_LEAK_REPORT_H_
