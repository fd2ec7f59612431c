// PeakStacks and LeakStacks.
#include "analyzer/reports/stack_weights.h"

#include "absl/strings/str_cat.h"

namespace cumemtrace::analyzer {
namespace {

bool DeviceIn(const CheckBounds& scope, int32_t device) {
  return !scope.device.has_value() || *scope.device == device;
}

}  // namespace

std::string TimelineName(int32_t device, int series) {
  return absl::StrCat(device < 0 ? std::string("host") : absl::StrCat("device ", device), " ", SeriesName(series));
}

std::vector<WeightedStack> PeakStacks(const Analysis& a, const CheckBounds& scope) {
  std::vector<WeightedStack> out;
  for (const PeakResult& p : a.peaks) {
    if (!DeviceIn(scope, p.device)) continue;
    const bool wanted = scope.series.has_value()
                            ? p.series == *scope.series
                            : p.series == kDeviceTotalSeries || IsHostMemory(static_cast<format::Kind>(p.series));
    if (!wanted || !p.at_peak.taken) continue;
    const std::string root = TimelineName(p.device, p.series);
    for (const StackGroup& g : p.at_peak.groups) out.push_back({root, p.device, p.series, g.stack, g.bytes, g.count});
  }
  return out;
}

std::vector<WeightedStack> LeakStacks(const Analysis& a, const CheckBounds& scope) {
  std::vector<WeightedStack> out;
  for (const LeakGroup& g : a.leaks) {
    if (!DeviceIn(scope, g.device)) continue;
    bool wanted = IsMemoryKind(g.kind);
    if (scope.series.has_value()) {
      wanted = *scope.series == kDeviceTotalSeries ? InDeviceTotal(g.kind) : static_cast<int>(g.kind) == *scope.series;
    }
    if (!wanted) continue;
    const int series = static_cast<int>(g.kind);
    out.push_back({TimelineName(g.device, series), g.device, series, g.stack, g.bytes, g.count});
  }
  return out;
}

}  // namespace cumemtrace::analyzer
