// RunCheck: the bounds in a fixed order (peak, leak, failed allocations); the first broken one is the verdict.
#include "analyzer/reports/check.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "analyzer/model/cuda_errors.h"
#include "analyzer/render/text_common.h"
#include "analyzer/reports/report_common.h"

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

std::string Where(const Analysis& a, uint64_t stack, const GroupKey& key, uint64_t stacks,
                  FrameResolver& resolver) {
  if (a.grouper == nullptr) return absl::StrCat("stack #", stack);
  const GroupLabel label = LabelGroup(key, stack, stacks, a.grouper.get(), resolver);
  std::string where = WhereText(label);
  return where.empty() ? absl::StrCat("stack #", stack) : where;
}

// The largest group at a peak, as "largest: at train.py:37 step (1.0 GiB)"; "" without a snapshot.
std::string LargestAtPeak(const Analysis& a, const PeakResult& p, FrameResolver& resolver) {
  if (!p.at_peak.taken || p.at_peak.groups.empty()) return "";
  const StackGroup& g = p.at_peak.groups.front();
  return absl::StrCat("; largest: ", Where(a, g.stack, g.key, g.stacks, resolver), " (", HumanBytes(g.bytes), ")");
}

std::string SeriesLabel(int32_t device, int series) {
  return absl::StrCat(DeviceName(device), " ", SeriesName(series));
}

}  // namespace

std::optional<int> SeriesByName(const std::string& name) {
  for (int s = 1; s < kNumSeries; ++s) {
    if (name == SeriesName(s)) return s;
  }
  return std::nullopt;
}

CheckVerdict RunCheck(const Analysis& a, const CheckBounds& b, FrameResolver& resolver) {
  std::vector<std::string> passed;
  if (b.max_peak.has_value()) {
    uint64_t highest = 0;
    int checked = 0;
    for (const PeakResult& p : a.peaks) {
      if (!DeviceMatches(b, p.device) || !PeakSeriesMatches(b, p.series)) continue;
      ++checked;
      if (p.counter.peak_bytes > *b.max_peak) {
        return {false, absl::StrCat("check failed: peak of ", SeriesLabel(p.device, p.series), " memory ",
                                    HumanBytes(p.counter.peak_bytes), " (", p.counter.peak_bytes, " B) at ",
                                    Seconds(a.info.Relative(p.counter.peak.time_ns)), " is over --max-peak ",
                                    HumanBytes(*b.max_peak), LargestAtPeak(a, p, resolver))};
      }
      highest = std::max(highest, p.counter.peak_bytes);
    }
    passed.push_back(absl::StrCat("peak ", HumanBytes(highest), " <= ", HumanBytes(*b.max_peak), " (",
                                  Plural(checked, "timeline", "timelines"), ")"));
  }
  if (b.max_leak.has_value()) {
    uint64_t bytes = 0;
    uint64_t count = 0;
    for (const LeakTotal& t : a.leak_totals) {
      if (!DeviceMatches(b, t.device) || !LeakKindMatches(b, t.kind)) continue;
      bytes += t.bytes;
      count += t.count;
    }
    if (bytes > *b.max_leak) {
      std::string largest;
      for (const LeakGroup& g : a.leaks) {  // largest first within memory kinds
        if (!DeviceMatches(b, g.device) || !LeakKindMatches(b, g.kind)) continue;
        largest = absl::StrCat("; largest: ", Where(a, g.stack, g.key, g.stacks, resolver), " (",
                               HumanBytes(g.bytes), " on ", DeviceName(g.device), " ", format::KindName(g.kind), ")");
        break;
      }
      return {false, absl::StrCat("check failed: ", HumanBytes(bytes), " (", bytes, " B) in ",
                                  Plural(count, "allocation", "allocations"),
                                  " still live at the end is over --max-leak ", HumanBytes(*b.max_leak), largest)};
    }
    passed.push_back(absl::StrCat("live at the end ", HumanBytes(bytes), " <= ", HumanBytes(*b.max_leak)));
  }
  if (b.no_oom) {
    uint64_t failures = b.device.has_value() ? 0 : a.oom_count;
    const OomRecord* first = nullptr;
    for (const OomRecord& r : a.ooms) {
      if (!DeviceMatches(b, r.event.device)) continue;
      if (first == nullptr) first = &r;
      if (b.device.has_value()) ++failures;
    }
    if (failures > 0) {
      std::string detail;
      if (first != nullptr) {
        const Event& e = first->event;
        detail = absl::StrCat("; first: ", HumanBytes(e.size), " by ", e.info->name, " on ", DeviceName(e.device),
                              " at ", Seconds(a.info.Relative(e.time_ns)), " (", CudaErrorString(e.result), ")");
        if (a.grouper != nullptr && e.stack != 0) {
          detail += absl::StrCat(" from ", Where(a, e.stack, a.grouper->KeyOf(e.stack), 1, resolver));
        }
      }
      return {false, absl::StrCat("check failed: ", Plural(failures, "failed allocation", "failed allocations"),
                                  " (--no-oom)", detail)};
    }
    passed.push_back("no failed allocation");
  }
  std::string line = "check passed:";
  for (size_t i = 0; i < passed.size(); ++i) absl::StrAppend(&line, i == 0 ? " " : "; ", passed[i]);
  return {true, line};
}

}  // namespace cumemtrace::analyzer
