// PyTorch's caching allocator in the reports: what the trace says about the allocator layer (attached? which
// config, what of it is modelled, are extents estimates?) and, per device, the peaks of allocated (tensor) and
// reserved memory with the tensors live at each, as memory_stats() names them. The peak report and the summary
// carry these sections; traces without the layer get none (and their output does not change).
#ifndef CUMEMTRACE_ANALYZER_REPORTS_TORCH_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_TORCH_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/reports/autograd_report.h"
#include "analyzer/reports/report_common.h"

namespace cumemtrace::analyzer {

struct TorchLayerSummary {
  bool present = false;     // the trace has the layer (an AllocatorAttach or TORCH_* events)
  bool attached = false;
  std::string library;
  std::string config;       // PYTORCH_CUDA_ALLOC_CONF as recorded
  bool expandable_segments = false;
  uint64_t max_split_size = 0;  // 0: unlimited
  std::vector<std::string> unmodelled;  // settings that change extents and are not modelled
  bool at_first_segment = false;
  bool estimate = false;    // extents (hence allocated bytes) are estimates: see AllocatorResult::estimate
  uint64_t mismatches = 0;
  uint64_t estimated_blocks = 0;
  uint64_t predating_frees = 0;
};

struct TorchPeakSection {
  int32_t device = 0;
  // Under --phase NAME: the peaks below are the phase's (PyTorch's own peaks had they been reset as it opened), and
  // the tensors live at the whole run's peaks are not listed. "" otherwise.
  std::string phase;
  // allocated_bytes.all (extents of live tensors): peak, when, and the tensors live then.
  uint64_t allocated_peak_bytes = 0;
  int64_t allocated_peak_time_ns = 0;  // relative
  uint64_t allocated_peak_seq = 0;
  uint64_t allocated_peak_count = 0;   // tensors live at that peak
  uint64_t requested_peak_bytes = 0;   // requested_bytes.all.peak
  uint64_t allocations_peak = 0;       // allocation.all.peak
  // reserved_bytes.all: peak, when (after the allocation that grew it), and reserved - allocated then.
  uint64_t reserved_peak_bytes = 0;
  int64_t reserved_peak_time_ns = 0;
  uint64_t reserved_peak_seq = 0;
  uint64_t allocated_at_reserved_peak = 0;
  uint64_t allocations_at_reserved_peak = 0;
  uint64_t unallocated_at_reserved_peak = 0;  // reserved - allocated
  uint64_t segments_peak = 0;                 // segment.all.peak (cudaMalloc'ed segments)
  TorchFigures at_end;
  uint64_t alloc_events = 0;
  uint64_t ooms = 0;
  std::vector<ResolvedGroup> at_allocated_peak;  // tensors by group, extents
  uint64_t allocated_peak_groups = 0;
  uint64_t allocated_peak_other_bytes = 0;       // in groups not listed
  uint64_t allocated_peak_other_count = 0;
  std::vector<ResolvedGroup> at_reserved_peak;
  uint64_t reserved_peak_groups = 0;
  uint64_t reserved_peak_other_bytes = 0;
  uint64_t reserved_peak_other_count = 0;
  AutogradView autograd;  // what kept the tensors live at the allocated peak (the whole run's peak only)
};

// What `snapshot` holds beyond the groups `shown`.
void OtherThan(const GroupedSnapshot& snapshot, const std::vector<ResolvedGroup>& shown, uint64_t* bytes,
               uint64_t* count);

TorchLayerSummary BuildTorchLayerSummary(const Analysis& analysis);
// One section per device with allocator events, by ordinal.
std::vector<TorchPeakSection> BuildTorchPeaks(const Analysis& analysis, const ReportOptions& options,
                                              FrameResolver& resolver);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_TORCH_REPORT_H_
