#include "analyzer/render/text/check_text.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "analyzer/model/memory/cuda_errors.h"
#include "analyzer/render/text/text_common.h"

namespace cumemtrace::analyzer {
namespace {

std::string Where(const CheckCulprit& c) {
  std::string where = c.label.has_value() ? WhereText(*c.label) : "";
  return where.empty() ? absl::StrCat("stack #", c.stack) : where;
}

std::string SeriesLabel(int32_t device, int series) {
  return absl::StrCat(DeviceName(device), " ", SeriesName(series));
}

std::string PeakFailure(const PeakCheck& c) {
  std::string largest;
  if (c.largest.has_value()) {
    largest = absl::StrCat("; largest: ", Where(*c.largest), " (", HumanBytes(c.largest->bytes), ")");
  }
  return absl::StrCat("check failed: peak of ", SeriesLabel(c.device, c.series), " memory ",
                      HumanBytes(c.peak_bytes), " (", c.peak_bytes, " B) at ", Seconds(c.peak_time_ns),
                      " is over --max-peak ", HumanBytes(c.bound), largest);
}

std::string LeakFailure(const LeakCheck& c) {
  std::string largest;
  if (c.largest.has_value()) {
    largest = absl::StrCat("; largest: ", Where(*c.largest), " (", HumanBytes(c.largest->bytes), " on ",
                           DeviceName(c.largest_device), " ", format::KindName(c.largest_kind), ")");
  }
  return absl::StrCat("check failed: ", HumanBytes(c.bytes), " (", c.bytes, " B) in ",
                      Plural(c.count, "allocation", "allocations"), " still live at the end is over --max-leak ",
                      HumanBytes(c.bound), largest);
}

std::string OomFailure(const OomCheck& c) {
  std::string detail;
  if (c.first != nullptr) {
    const Event& e = *c.first;
    detail = absl::StrCat("; first: ", HumanBytes(e.size), " by ", e.info->name, " on ", DeviceName(e.device),
                          " at ", Seconds(c.first_time_ns), " (", CudaErrorString(e.result), ")");
    if (c.first_from.has_value()) detail += absl::StrCat(" from ", Where(*c.first_from));
  }
  return absl::StrCat("check failed: ", Plural(c.failures, "failed allocation", "failed allocations"), " (--no-oom)",
                      detail);
}

}  // namespace

std::string CheckLine(const CheckReport& r) {
  if (r.peak.has_value() && r.peak->broken) return PeakFailure(*r.peak);
  if (r.leak.has_value() && r.leak->broken) return LeakFailure(*r.leak);
  if (r.oom.has_value() && r.oom->failures != 0) return OomFailure(*r.oom);
  std::vector<std::string> passed;
  if (r.peak.has_value()) {
    passed.push_back(absl::StrCat("peak ", HumanBytes(r.peak->highest), " <= ", HumanBytes(r.peak->bound), " (",
                                  Plural(r.peak->timelines, "timeline", "timelines"), ")"));
  }
  if (r.leak.has_value()) {
    passed.push_back(absl::StrCat("live at the end ", HumanBytes(r.leak->bytes), " <= ", HumanBytes(r.leak->bound)));
  }
  if (r.oom.has_value()) passed.push_back("no failed allocation");
  std::string line = "check passed:";
  for (size_t i = 0; i < passed.size(); ++i) absl::StrAppend(&line, i == 0 ? " " : "; ", passed[i]);
  return line;
}

}  // namespace cumemtrace::analyzer
