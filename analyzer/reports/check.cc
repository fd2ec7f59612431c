// BuildCheckReport: the bounds in a fixed order (peak, leak, failed allocations); the first broken one ends it.
#include "analyzer/reports/check.h"

#include <algorithm>

namespace cumemtrace::analyzer {
namespace {

bool DeviceMatches(const CheckBounds& b, int32_t device) { return !b.device.has_value() || *b.device == device; }

bool PeakSeriesMatches(const CheckBounds& b, int series) {
  return series == b.series.value_or(kDeviceTotalSeries);
}

bool LeakKindMatches(const CheckBounds& b, format::Kind kind) {
  if (!b.series.has_value()) return IsMemoryKind(kind);
  if (*b.series == kDeviceTotalSeries) return InDeviceTotal(kind);
  return static_cast<int>(kind) == *b.series;
}

CheckCulprit Culprit(const Analysis& a, uint64_t stack, const GroupKey& key, uint64_t stacks, uint64_t bytes,
                     FrameResolver& resolver) {
  CheckCulprit c;
  c.stack = stack;
  c.bytes = bytes;
  if (a.grouper != nullptr) c.label = LabelGroup(key, stack, stacks, a.grouper.get(), resolver);
  return c;
}

PeakCheck CheckPeak(const Analysis& a, const CheckBounds& b, FrameResolver& resolver) {
  PeakCheck c;
  c.bound = *b.max_peak;
  for (const PeakResult& p : a.peaks) {
    if (!DeviceMatches(b, p.device) || !PeakSeriesMatches(b, p.series)) continue;
    ++c.timelines;
    if (p.counter.peak_bytes > c.bound) {
      c.broken = true;
      c.device = p.device;
      c.series = p.series;
      c.peak_bytes = p.counter.peak_bytes;
      c.peak_time_ns = a.info.Relative(p.counter.peak.time_ns);
      if (p.at_peak.taken && !p.at_peak.groups.empty()) {
        const StackGroup& g = p.at_peak.groups.front();
        c.largest = Culprit(a, g.stack, g.key, g.stacks, g.bytes, resolver);
      }
      return c;
    }
    c.highest = std::max(c.highest, p.counter.peak_bytes);
  }
  return c;
}

LeakCheck CheckLeak(const Analysis& a, const CheckBounds& b, FrameResolver& resolver) {
  LeakCheck c;
  c.bound = *b.max_leak;
  for (const LeakTotal& t : a.leak_totals) {
    if (!DeviceMatches(b, t.device) || !LeakKindMatches(b, t.kind)) continue;
    c.bytes += t.bytes;
    c.count += t.count;
  }
  if (c.bytes <= c.bound) return c;
  c.broken = true;
  for (const LeakGroup& g : a.leaks) {  // largest first within memory kinds
    if (!DeviceMatches(b, g.device) || !LeakKindMatches(b, g.kind)) continue;
    c.largest = Culprit(a, g.stack, g.key, g.stacks, g.bytes, resolver);
    c.largest_device = g.device;
    c.largest_kind = g.kind;
    break;
  }
  return c;
}

OomCheck CheckOom(const Analysis& a, const CheckBounds& b, FrameResolver& resolver) {
  OomCheck c;
  // Without --device every failure counts, kept or not; with it, only the kept records can say their device.
  c.failures = b.device.has_value() ? 0 : a.oom_count;
  for (const OomRecord& r : a.ooms) {
    if (!DeviceMatches(b, r.event.device)) continue;
    if (c.first == nullptr) c.first = &r.event;
    if (b.device.has_value()) ++c.failures;
  }
  if (c.first != nullptr) {
    c.first_time_ns = a.info.Relative(c.first->time_ns);
    if (a.grouper != nullptr && c.first->stack != 0) {
      c.first_from = Culprit(a, c.first->stack, a.grouper->KeyOf(c.first->stack), 1, 0, resolver);
    }
  }
  return c;
}

}  // namespace

std::optional<int> SeriesByName(const std::string& name) {
  for (int s = 1; s < kNumSeries; ++s) {
    if (name == SeriesName(s)) return s;
  }
  return std::nullopt;
}

CheckReport BuildCheckReport(const Analysis& a, const CheckBounds& b, FrameResolver& resolver) {
  CheckReport r;
  if (b.max_peak.has_value()) {
    r.peak = CheckPeak(a, b, resolver);
    if (r.peak->broken) {
      r.passed = false;
      return r;
    }
  }
  if (b.max_leak.has_value()) {
    r.leak = CheckLeak(a, b, resolver);
    if (r.leak->broken) {
      r.passed = false;
      return r;
    }
  }
  if (b.no_oom) {
    r.oom = CheckOom(a, b, resolver);
    r.passed = r.oom->failures == 0;
  }
  return r;
}

}  // namespace cumemtrace::analyzer
