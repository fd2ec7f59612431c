// Shared report helpers: resolving stack groups into frames.
#include "analyzer/reports/report_common.h"

#include <algorithm>

namespace cumemtrace::analyzer {

double Share(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

std::vector<ResolvedGroup> ResolveGroups(const std::vector<StackGroup>& groups, uint64_t total_bytes,
                                         const ReportOptions& options, FrameResolver& resolver) {
  std::vector<ResolvedGroup> out;
  const size_t n = std::min(groups.size(), options.top);
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    ResolvedGroup g;
    g.stack_id = groups[i].stack;
    g.bytes = groups[i].bytes;
    g.count = groups[i].count;
    g.share = Share(g.bytes, total_bytes);
    g.frames = resolver.ResolveStack(g.stack_id, options.frames);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace cumemtrace::analyzer
