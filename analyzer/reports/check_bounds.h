// The bounds `cumem-analyze check` enforces, apart from check.h so that the command line can hold them without
// pulling in the model.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_CHECK_BOUNDS_H_
#define CUMEMTRACE_ANALYZER_REPORTS_CHECK_BOUNDS_H_

#include <cstdint>
#include <optional>

namespace cumemtrace::analyzer {

struct CheckBounds {
  std::optional<uint64_t> max_peak;  // bytes
  std::optional<uint64_t> max_leak;  // bytes live at the end
  bool no_oom = false;
  std::optional<int32_t> device;  // only this device (-1: host)
  // A series (format::Kind value, or kDeviceTotalSeries for "total"). Default: the device total for --max-peak
  // and every memory kind for --max-leak.
  std::optional<int> series;

  bool any() const { return max_peak.has_value() || max_leak.has_value() || no_oom; }
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_CHECK_BOUNDS_H_
