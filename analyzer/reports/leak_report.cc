// The leak report from the model's end-of-trace grouping. Must never sum address space or mappings into memory.
#include "analyzer/reports/leak_report.h"

#include <algorithm>

namespace cumemtrace::analyzer {

LeakReport BuildLeakReport(const Analysis& a, const ReportOptions& options, FrameResolver& resolver) {
  LeakReport r;
  r.totals = a.leak_totals;
  r.group_count = a.leaks.size();
  r.clean_end = a.info.has_trailer;
  for (const LeakTotal& t : a.leak_totals) {
    if (!IsMemoryKind(t.kind)) continue;
    r.memory_bytes += t.bytes;
    r.memory_count += t.count;
  }
  r.torch_layer = BuildTorchLayerSummary(a);
  for (const TorchDeviceResult& d : a.allocator.devices) {
    r.tensor_count += d.at_end.allocations;
    r.tensor_allocated_bytes += d.at_end.allocated_bytes;
    r.pytorch_reserved_bytes += d.at_end.reserved_bytes;
    r.pytorch_cached_bytes += d.at_end.reserved_bytes > d.at_end.allocated_bytes
                                  ? d.at_end.reserved_bytes - d.at_end.allocated_bytes
                                  : 0;
  }
  for (const LeakTotal& t : a.leak_totals) {
    if (t.kind == format::Kind::kTorchBlock) r.tensor_requested_bytes += t.bytes;
  }
  for (const LeakGroup& g : a.leaks) {
    if (g.pytorch_cache) {
      r.pytorch_cache_driver_bytes += g.bytes;
      r.pytorch_cache_driver_count += g.count;
    }
  }
  const size_t n = std::min(a.leaks.size(), options.top);
  for (size_t i = 0; i < n; ++i) {
    const LeakGroup& g = a.leaks[i];
    LeakEntry e;
    e.device = g.device;
    e.kind = format::KindName(g.kind);
    e.address_space_or_view = IsAddressSpaceOrView(g.kind);
    e.bytes = g.bytes;
    e.count = g.count;
    e.stack_id = g.stack;
    e.frames = resolver.ResolveStack(g.stack, options.frames);
    e.view = MakeStackView(g.stack, options, resolver, a.grouper.get());
    e.pytorch_cache = g.pytorch_cache;
    e.label = LabelGroup(g.key, g.stack, g.stacks, a.grouper.get(), resolver);
    e.growth = g.growth;
    e.phase = g.phase;
    r.top.push_back(std::move(e));
  }
  return r;
}

}  // namespace cumemtrace::analyzer
