// Analyze(): one ScanPass over the trace, and a PinnedPass only when the pinned host changes outgrew their log.
#include "analyzer/model/analysis.h"

#include "analyzer/model/scan_pass.h"

namespace cumemtrace::analyzer {

const PeakResult* Analysis::FindPeak(int32_t device, int series) const {
  for (const PeakResult& p : peaks) {
    if (p.device == device && p.series == series) return &p;
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<Analysis>> Analyze(const std::string& path, const AnalyzeOptions& options) {
  auto analysis = std::make_unique<Analysis>();
  Analysis& a = *analysis;
  a.info.path = path;
  bool pinned_done = true;
  {
    ScanPass scan(a, options);
    if (absl::Status s = ReadTrace(path, scan, &a.info.stats); !s.ok()) return s;
    pinned_done = scan.Finish();
  }
  if (pinned_done) return analysis;

  PinnedTracker tracker(a.info.StartNs(), a.info.DurationNs());
  PinnedPass pass(tracker, a.model.events);
  ReadStats second;
  if (absl::Status s = ReadTrace(path, pass, &second); !s.ok()) return s;
  a.pinned = tracker.Finish(a.grouper.get());
  a.second_pass = true;
  return analysis;
}

}  // namespace cumemtrace::analyzer
