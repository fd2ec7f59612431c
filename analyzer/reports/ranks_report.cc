// The ranks report from each trace's Analysis. Reads only the model.
#include "analyzer/reports/ranks_report.h"

#include <algorithm>
#include <tuple>

namespace cumemtrace::analyzer {

RankEntry BuildRankEntry(const Analysis& a) {
  RankEntry e;
  const TraceHeader& h = a.info.header;
  e.path = a.info.path;
  e.rank = h.rank;
  e.local_rank = h.local_rank;
  e.world_size = h.world_size;
  e.hostname = h.hostname;
  e.pid = h.pid;
  e.events = a.info.stats.events;
  e.failed_allocations = a.model.failed_allocations;
  for (const LeakTotal& t : a.leak_totals) {
    if (IsMemoryKind(t.kind)) e.leaked_bytes += t.bytes;
  }
  for (const PeakResult& p : a.peaks) {
    if (p.series != kDeviceTotalSeries || p.device == format::kHostDevice) continue;
    RankDevice d;
    d.device = p.device;
    d.peak_bytes = p.counter.peak_bytes;
    d.peak_time_ns = p.counter.peak_bytes == 0 ? 0 : a.info.Relative(p.counter.peak.time_ns);
    for (const OwnerUsage& o : a.owners) {
      if (o.device == p.device && o.bytes_at_device_peak != 0) {
        d.owners_at_peak.push_back(RankOwnerBytes{o.name.slug, o.bytes_at_device_peak});
      }
    }
    std::sort(d.owners_at_peak.begin(), d.owners_at_peak.end(), [](const RankOwnerBytes& x, const RankOwnerBytes& y) {
      return x.bytes != y.bytes ? x.bytes > y.bytes : x.owner < y.owner;
    });
    e.devices.push_back(std::move(d));
  }
  std::sort(e.devices.begin(), e.devices.end(),
            [](const RankDevice& x, const RankDevice& y) { return x.device < y.device; });
  return e;
}

RanksReport BuildRanksReport(std::vector<RankEntry> entries) {
  RanksReport r;
  std::stable_sort(entries.begin(), entries.end(), [](const RankEntry& x, const RankEntry& y) {
    const bool xr = x.rank >= 0, yr = y.rank >= 0;
    if (xr != yr) return xr;
    if (xr && x.rank != y.rank) return x.rank < y.rank;
    return std::tie(x.pid, x.path) < std::tie(y.pid, y.path);
  });
  r.entries = std::move(entries);
  RanksSpread& s = r.spread;
  for (size_t i = 0; i < r.entries.size(); ++i) {
    for (const RankDevice& d : r.entries[i].devices) {
      if (!s.any || d.peak_bytes > s.device_peak_max) {
        s.device_peak_max = d.peak_bytes;
        s.max_entry = i;
        s.max_device = d.device;
      }
      if (!s.any || d.peak_bytes < s.device_peak_min) {
        s.device_peak_min = d.peak_bytes;
        s.min_entry = i;
        s.min_device = d.device;
      }
      s.any = true;
    }
  }
  if (s.any && s.device_peak_min != 0) {
    s.max_over_min = static_cast<double>(s.device_peak_max) / static_cast<double>(s.device_peak_min);
  }
  return r;
}

}  // namespace cumemtrace::analyzer
