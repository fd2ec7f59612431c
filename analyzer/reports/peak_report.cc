// The peak report from the model's peaks and their snapshots.
#include "analyzer/reports/peak_report.h"

namespace cumemtrace::analyzer {
namespace {

PeakSection MakeSection(const Analysis& a, const PeakResult& p, const ReportOptions& options,
                        FrameResolver& resolver) {
  PeakSection s;
  s.device = p.device;
  s.series = p.series;
  s.kind = SeriesName(p.series);
  s.peak_bytes = p.counter.peak_bytes;
  s.peak_count = p.counter.peak_count;
  s.peak_time_ns = p.counter.peak_bytes == 0 ? 0 : a.info.Relative(p.counter.peak.time_ns);
  s.peak_seq = p.counter.peak.seq;
  s.final_bytes = p.counter.bytes;
  s.final_count = p.counter.count;
  s.allocations = p.counter.allocations;
  s.allocated_bytes = p.counter.allocated_bytes;
  s.snapshot_taken = p.at_peak.taken;
  if (p.at_peak.taken) {
    s.top = ResolveGroups(p.at_peak.groups, p.at_peak.total_bytes, options, resolver, a.grouper.get());
    s.group_count = p.at_peak.group_count;
    s.other_bytes = p.at_peak.total_bytes;
    s.other_count = p.at_peak.total_count;
    for (const ResolvedGroup& g : s.top) {
      s.other_bytes -= g.bytes;
      s.other_count -= g.count;
    }
  }
  return s;
}

}  // namespace

PeakReport BuildPeakReport(const Analysis& a, const ReportOptions& options, FrameResolver& resolver) {
  PeakReport report;
  report.phases = a.phases;
  report.start_ns = a.info.StartNs();
  for (const PeakResult& p : a.peaks) {
    PeakSection s = MakeSection(a, p, options, resolver);
    if (p.series == kDeviceTotalSeries) {
      report.device_totals.push_back(std::move(s));
    } else {
      report.peaks.push_back(std::move(s));
    }
  }
  report.torch_layer = BuildTorchLayerSummary(a);
  report.torch = BuildTorchPeaks(a, options, resolver);
  return report;
}

}  // namespace cumemtrace::analyzer
