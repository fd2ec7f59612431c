// The allocator-layer sections of the reports, from AllocatorResult alone.
#include "analyzer/reports/torch_report.h"

#include <limits>

namespace cumemtrace::analyzer {
namespace {

}  // namespace

void OtherThan(const GroupedSnapshot& s, const std::vector<ResolvedGroup>& shown, uint64_t* bytes, uint64_t* count) {
  *bytes = s.total_bytes;
  *count = s.total_count;
  for (const ResolvedGroup& g : shown) {
    *bytes -= g.bytes;
    *count -= g.count;
  }
}

namespace {

}  // namespace

TorchLayerSummary BuildTorchLayerSummary(const Analysis& a) {
  const AllocatorResult& r = a.allocator;
  TorchLayerSummary s;
  s.present = r.attached || r.events;
  s.attached = r.attached;
  s.library = r.attach.library;
  s.config = r.config.text;
  s.expandable_segments = r.config.expandable_segments;
  s.max_split_size = r.config.max_split_size == std::numeric_limits<uint64_t>::max() ? 0 : r.config.max_split_size;
  s.unmodelled = r.config.unmodelled;
  s.at_first_segment = r.attach.at_first_segment;
  s.estimate = r.estimate();
  s.mismatches = r.mismatches;
  s.estimated_blocks = r.estimated_blocks;
  s.predating_frees = r.predating_frees;
  return s;
}

namespace {

// Under --phase NAME, the phase's own peaks of PyTorch's figures replace the whole run's (a --window has no such
// peaks: its figures stay the whole run's, which the phase-filter line says).
void LimitToPhase(const PhaseResults& phases, TorchPeakSection* s) {
  if (!phases.filter_active) return;
  for (const PhaseSummary& summary : phases.phases) {
    if (summary.name != phases.filter_label) continue;
    s->phase = summary.name;
    s->allocated_peak_bytes = s->requested_peak_bytes = s->reserved_peak_bytes = 0;
    s->allocated_peak_time_ns = s->reserved_peak_time_ns = 0;
    s->allocated_peak_seq = s->reserved_peak_seq = 0;
    for (const PhasePeak& p : summary.peaks) {
      if (p.device != s->device) continue;
      if (p.series == kTorchAllocatedSeries) {
        s->allocated_peak_bytes = p.peak_bytes;
        s->allocated_peak_seq = p.at.seq;
      } else if (p.series == kTorchRequestedSeries) {
        s->requested_peak_bytes = p.peak_bytes;
      } else if (p.series == kTorchReservedSeries) {
        s->reserved_peak_bytes = p.peak_bytes;
        s->reserved_peak_seq = p.at.seq;
      }
    }
    s->at_allocated_peak.clear();
    s->at_reserved_peak.clear();
    s->autograd = AutogradView{};
    s->allocated_peak_count = 0;
    s->allocated_at_reserved_peak = 0;
    s->unallocated_at_reserved_peak = 0;
    return;
  }
}

}  // namespace

std::vector<TorchPeakSection> BuildTorchPeaks(const Analysis& a, const ReportOptions& options,
                                              FrameResolver& resolver) {
  std::vector<TorchPeakSection> out;
  for (const TorchDeviceResult& d : a.allocator.devices) {
    const TorchDeviceStats& st = d.stats;
    TorchPeakSection s;
    s.device = st.device;
    s.allocated_peak_bytes = st.allocated_bytes.peak;
    if (st.allocated_bytes.peak != 0) {
      s.allocated_peak_time_ns = a.info.Relative(st.allocated_bytes.peak_at.time_ns);
      s.allocated_peak_seq = st.allocated_bytes.peak_at.seq;
    }
    s.allocated_peak_count = d.at_allocated_peak.total_count;
    s.requested_peak_bytes = st.requested_bytes.peak;
    s.allocations_peak = st.allocations.peak;
    s.reserved_peak_bytes = st.reserved_bytes.peak;
    if (st.reserved_bytes.peak != 0) {
      s.reserved_peak_time_ns = a.info.Relative(st.reserved_bytes.peak_at.time_ns);
      s.reserved_peak_seq = st.reserved_bytes.peak_at.seq;
    }
    s.allocated_at_reserved_peak = st.allocated_at_reserved_peak;
    s.allocations_at_reserved_peak = st.allocations_at_reserved_peak;
    s.unallocated_at_reserved_peak =
        st.reserved_bytes.peak > st.allocated_at_reserved_peak ? st.reserved_bytes.peak - st.allocated_at_reserved_peak
                                                              : 0;
    s.segments_peak = st.segments.peak;
    s.at_end = d.at_end;
    s.alloc_events = st.alloc_events;
    s.ooms = st.ooms;
    if (d.at_allocated_peak.taken) {
      s.at_allocated_peak = ResolveGroups(d.at_allocated_peak.groups, d.at_allocated_peak.total_bytes, options,
                                          resolver, a.grouper.get());
      s.allocated_peak_groups = d.at_allocated_peak.group_count;
      OtherThan(d.at_allocated_peak, s.at_allocated_peak, &s.allocated_peak_other_bytes,
                &s.allocated_peak_other_count);
    }
    if (d.at_reserved_peak.taken) {
      s.at_reserved_peak = ResolveGroups(d.at_reserved_peak.groups, d.at_reserved_peak.total_bytes, options,
                                         resolver, a.grouper.get());
      s.reserved_peak_groups = d.at_reserved_peak.group_count;
      OtherThan(d.at_reserved_peak, s.at_reserved_peak, &s.reserved_peak_other_bytes, &s.reserved_peak_other_count);
    }
    s.autograd = BuildAutogradView(d.retention_at_allocated_peak, a.info.header.executable, resolver);
    LimitToPhase(a.phases, &s);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace cumemtrace::analyzer
