// Analyze(): one ScanPass over the trace, and a PinnedPass only when the pinned host changes outgrew their log. When
// the first ScanPass finds training and validation in a trace without NVTX ranges, the whole analysis is made once
// more with them as phases: a phase's peaks, and the --phase filter, need to know a range when it opens.
#include "analyzer/model/analysis.h"

#include "analyzer/model/scan_pass.h"

namespace cumemtrace::analyzer {

const PeakResult* Analysis::FindPeak(int32_t device, int series) const {
  for (const PeakResult& p : peaks) {
    if (p.device == device && p.series == series) return &p;
  }
  return nullptr;
}

namespace {

absl::StatusOr<std::unique_ptr<Analysis>> AnalyzeOnce(const std::string& path, const AnalyzeOptions& options,
                                                      const std::vector<PhaseInfo>& detected_phases) {
  auto analysis = std::make_unique<Analysis>();
  Analysis& a = *analysis;
  a.info.path = path;
  bool pinned_done = true;
  {
    ScanPass scan(a, options, detected_phases);
    if (absl::Status s = ReadTrace(path, scan, &a.info.stats); !s.ok()) return s;
    pinned_done = scan.Finish();
  }
  // Phases were found: this analysis is only the way to them (Analyze reads the trace again with them).
  if (pinned_done || !a.detected_phases.empty()) return analysis;

  PinnedTracker tracker(a.info.StartNs(), a.info.DurationNs());
  PinnedPass pass(tracker, a.model.events);
  ReadStats second;
  if (absl::Status s = ReadTrace(path, pass, &second); !s.ok()) return s;
  a.pinned = tracker.Finish(a.grouper.get());
  a.second_pass = true;
  return analysis;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Analysis>> Analyze(const std::string& path, const AnalyzeOptions& options) {
  absl::StatusOr<std::unique_ptr<Analysis>> first = AnalyzeOnce(path, options, {});
  if (!first.ok() || (*first)->detected_phases.empty()) return first;
  const std::vector<PhaseInfo> detected = std::move((*first)->detected_phases);
  first->reset();  // one analysis in memory at a time
  if (options.progress_stage) options.progress_stage("reading it again with the training and validation found");
  return AnalyzeOnce(path, options, detected);
}

}  // namespace cumemtrace::analyzer
