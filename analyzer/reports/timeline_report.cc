#include "analyzer/reports/timeline_report.h"

#include "absl/strings/str_cat.h"
#include "analyzer/model/memory/cuda_errors.h"
#include "analyzer/model/trace_info.h"
#include "analyzer/model/memory/timelines.h"
#include "analyzer/reports/stack_weights.h"

namespace cumemtrace::analyzer {

TimelineReport BuildTimelineReport(const Analysis& a, const History& h) {
  TimelineReport r;
  r.start_ns = a.info.StartNs();
  r.pid = a.info.header.pid;
  std::string name = a.info.header.argv.empty() ? a.info.path : a.info.header.argv.front();
  for (size_t i = 1; i < a.info.header.argv.size() && i < 4; ++i) absl::StrAppend(&name, " ", a.info.header.argv[i]);
  r.process_name = std::move(name);

  for (const BucketedSeries& s : h.series) {
    CounterTrack track;
    track.name = TimelineName(s.device, s.series);
    bool any = false;
    uint64_t last = 0;
    for (int b = 0; b < h.buckets; ++b) {
      const int64_t t0 = b * h.bucket_ns;
      if (!any || s.max[b] != last) track.points.push_back({t0, s.max[b]});
      if (s.last[b] != s.max[b] && h.bucket_ns > 1) {
        track.points.push_back({SaturatingAdd(t0, h.bucket_ns - 1), s.last[b]});  // may end past int64
      }
      last = s.last[b];
      any = true;
    }
    r.series.push_back(std::move(track));
  }
  for (const DriverPoint& p : h.driver) r.driver.push_back({p.device, p.time_ns, p.used_bytes});
  for (const PhaseRange& p : a.phases.ranges) {
    r.phases.push_back({p.name, p.thread, p.domain, p.stacked, a.info.Relative(p.begin_ns), a.info.Relative(p.end_ns)});
  }
  for (const OomRecord& o : a.ooms) {
    const Event& e = o.event;
    r.ooms.push_back({a.info.Relative(e.time_ns), e.info->name, e.size, e.device, CudaErrorString(e.result),
                      o.live_bytes, e.has_mem_info, e.free_bytes, e.total_bytes});
  }
  for (const PeakResult& p : a.peaks) {
    if (p.series != kDeviceTotalSeries && !IsHostMemory(static_cast<format::Kind>(p.series))) continue;
    r.peaks.push_back({a.info.Relative(p.counter.peak.time_ns), TimelineName(p.device, p.series),
                       p.counter.peak_bytes});
  }
  return r;
}

}  // namespace cumemtrace::analyzer
