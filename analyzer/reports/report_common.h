// Pieces every report shares: options, stack groups with their frames resolved, and the overview of the trace
// (process, devices, threads, the tool's health). Reports read only the model; renderers read only reports.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_REPORT_COMMON_H_
#define CUMEMTRACE_ANALYZER_REPORTS_REPORT_COMMON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/analysis.h"
#include "analyzer/model/frame_resolver.h"

namespace cumemtrace::analyzer {

struct ReportOptions {
  size_t top = 10;     // stack groups / entries per list
  size_t frames = 8;   // frames per stack, innermost first
};

struct ResolvedGroup {
  uint64_t stack_id = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  double share = 0;  // bytes / the total the group is part of (0 when that total is 0)
  std::vector<Frame> frames;
};

// What the trace says about itself and about the tool that wrote it.
struct Overview {
  const TraceInfo* info = nullptr;
  ModelStats model;
};

// Groups [0, top) of `groups`, each with up to `frames` frames; share against `total_bytes`.
std::vector<ResolvedGroup> ResolveGroups(const std::vector<StackGroup>& groups, uint64_t total_bytes,
                                         const ReportOptions& options, FrameResolver& resolver);

double Share(uint64_t part, uint64_t whole);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_REPORT_COMMON_H_
