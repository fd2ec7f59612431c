// The phases section (see phases_render.h).
#include "analyzer/render/phases_render.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/model/trace_info.h"
#include "analyzer/render/text/text_common.h"

namespace cumemtrace::analyzer {

void AppendPhaseFilterText(const PhaseResults& phases, std::string* out) {
  if (!phases.filter_active) return;
  absl::StrAppendFormat(out,
                        "Only inside phase %s (%s): peaks reached while it ran, failed allocations and leaks made "
                        "in it.\n\n",
                        Printable(phases.filter_label), Plural(phases.filter_events, "event", "events"));
}

void AppendPhasesText(const PhaseResults& phases, int64_t start_ns, std::string* out) {
  if (phases.phases.empty()) return;
  if (phases.detected) {
    absl::StrAppendFormat(out,
                          "Peak per phase (no NVTX ranges; %s found by the analyzer: validation is code that runs "
                          "between backward passes now and then, train the stretches with backward passes between "
                          "them):\n",
                          Plural(phases.ranges.size(), "range", "ranges"));
  } else {
    absl::StrAppendFormat(out, "Peak per phase (NVTX ranges: %s%s):\n", Plural(phases.ranges.size(), "range", "ranges"),
                          phases.marks > 0 ? absl::StrCat(", ", Plural(phases.marks, "mark", "marks")) : "");
  }
  std::vector<std::vector<std::string>> rows = {{"phase", "ranges", "first at", "time in it", "device", "kind",
                                                 "peak"}};
  for (const PhaseSummary& s : phases.phases) {
    const std::string first_at = Seconds(std::max<int64_t>(0, SaturatingSub(s.first_ns, start_ns)));
    bool first = true;
    for (const PhasePeak& p : s.peaks) {
      if (p.series != kDeviceTotalSeries && p.series != kTorchAllocatedSeries &&
          !(p.device == format::kHostDevice && p.peak_bytes > 0)) {
        continue;  // the device total (and PyTorch's tensors, pinned host memory) say it; every kind in JSON
      }
      rows.push_back({first ? Printable(s.name) : "", first ? absl::StrCat(s.occurrences) : "",
                      first ? first_at : "", first ? Seconds(s.total_ns) : "",
                      DeviceName(p.device), PhaseSeriesName(p.series), HumanBytes(p.peak_bytes)});
      first = false;
    }
    if (first) {
      rows.push_back({Printable(s.name), absl::StrCat(s.occurrences), first_at,
                      Seconds(s.total_ns), "", "", "nothing allocated"});
    }
  }
  absl::StrAppend(out, Table(rows, "lrrrllr", "  "), "\n");
}

void WritePhaseFilterJson(JsonWriter& w, const PhaseResults& phases) {
  w.Key("phase_filter");
  if (phases.filter_active) {
    w.BeginObject();
    w.Member("label", phases.filter_label);
    w.Member("events", phases.filter_events);
    w.EndObject();
  } else {
    w.Null();
  }
}

void WritePhasesJson(JsonWriter& w, const PhaseResults& phases, int64_t start_ns) {
  w.Key("phases");
  w.BeginArray();
  for (const PhaseSummary& s : phases.phases) {
    w.BeginObject();
    w.Member("name", s.name);
    w.Member("ranges", s.occurrences);
    w.Member("first_ns", SaturatingSub(s.first_ns, start_ns));
    w.Member("total_ns", s.total_ns);
    w.Key("peaks");
    w.BeginArray();
    for (const PhasePeak& p : s.peaks) {
      w.BeginObject();
      w.Member("device", p.device);
      w.Member("kind", PhaseSeriesName(p.series));
      w.Member("peak_bytes", p.peak_bytes);
      w.Member("seq", p.at.seq);
      w.Member("time_ns", p.at.time_ns == 0 ? int64_t{0} : SaturatingSub(p.at.time_ns, start_ns));
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Member("phases_detected", phases.detected);
  w.Key("phase_ranges");
  w.BeginArray();
  for (const PhaseRange& r : phases.ranges) {
    w.BeginObject();
    w.Member("name", r.name);
    w.Member("path", r.path);
    w.Member("thread_index", r.thread);
    w.Member("domain", r.domain);
    w.Member("begin_ns", SaturatingSub(r.begin_ns, start_ns));
    w.Member("end_ns", SaturatingSub(r.end_ns, start_ns));
    w.Member("after_seq", r.begin_seq);
    w.Member("until_seq", r.end_seq);
    w.Member("closed", r.closed);
    w.EndObject();
  }
  w.EndArray();
  w.Member("phase_ranges_dropped", phases.ranges_dropped);
  w.Member("phase_marks", phases.marks);
  w.Member("phase_unmatched_closes", phases.unmatched_closes);
}

}  // namespace cumemtrace::analyzer
