// The peak report: for each device and memory kind (and each device's total), the peak, when it happened, and
// the allocations live at that moment grouped by stack, largest first.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_PEAK_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_PEAK_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/reports/report_common.h"
#include "analyzer/reports/torch_report.h"

namespace cumemtrace::analyzer {

struct PeakSection {
  int32_t device = 0;
  int series = 0;     // format::Kind value, or kDeviceTotalSeries
  const char* kind = "";  // SeriesName(series)
  uint64_t peak_bytes = 0;
  uint64_t peak_count = 0;
  int64_t peak_time_ns = 0;  // relative to the start of the trace
  uint64_t peak_seq = 0;
  uint64_t final_bytes = 0;
  uint64_t final_count = 0;
  uint64_t allocations = 0;
  uint64_t allocated_bytes = 0;
  bool snapshot_taken = false;
  std::vector<ResolvedGroup> top;  // live at the peak, by stack
  uint64_t group_count = 0;        // stacks live at the peak in all
  uint64_t other_bytes = 0;        // live at the peak in stacks not in `top`
  uint64_t other_count = 0;
};

struct PeakReport {
  std::vector<PeakSection> peaks;          // one per (device, kind) with allocations
  std::vector<PeakSection> device_totals;  // one per device with device memory (kind "total")
  PhaseResults phases;                     // peak per NVTX phase, the --phase / --window filter
  int64_t start_ns = 0;                    // the trace's start, for the phases' times
  TorchLayerSummary torch_layer;
  std::vector<TorchPeakSection> torch;     // PyTorch's allocator per device (empty without its layer)
};

PeakReport BuildPeakReport(const Analysis& analysis, const ReportOptions& options, FrameResolver& resolver);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_PEAK_REPORT_H_
