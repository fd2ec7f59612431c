#include "analyzer/reports/page_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "analyzer/model/memory/cuda_errors.h"
#include "analyzer/model/memory/timelines.h"
#include "analyzer/model/stacks/frame_class.h"
#include "analyzer/model/stacks/stack_grouper.h"

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kMaxFrames = 256;

// Resolves each stack the page refers to, once.
class StackCatalog {
 public:
  StackCatalog(const Analysis& a, const GroupingOptions& grouping, absl::flat_hash_map<uint64_t, PageStack>* out)
      : resolver_(a.stacks, a.symbols, a.python_frames),
        grouper_(a.stacks, a.symbols, a.python_frames, a.info.header.executable, grouping),
        out_(out) {}

  void Add(uint64_t id) {
    auto [it, added] = out_->try_emplace(id);
    if (!added) return;
    PageStack& s = it->second;
    for (const Frame& f : resolver_.ResolveStack(id, kMaxFrames)) s.frames.push_back(Of(f));
    const StackKeyInfo& info = grouper_.Describe(id);
    if (info.key.kind != GroupKey::Kind::kStack) s.group = Of(resolver_.ResolvePc(info.key.value));
    s.fallback = info.key.kind == GroupKey::Kind::kFallback;
  }

  void AddScope(const GroupedSnapshot& live, size_t cap) {
    for (size_t i = 0; i < std::min(cap, live.groups.size()); ++i) Add(live.groups[i].stack);
  }

 private:
  PageFrame Of(const Frame& f) { return {f, grouper_.ClassOf(f.pc) == FrameClass::kUser}; }

  FrameResolver resolver_;
  StackGrouper grouper_;
  absl::flat_hash_map<uint64_t, PageStack>* out_;
};

}  // namespace

PageReport BuildPageReport(const Analysis& a, const History& h, const PageOptions& options) {
  PageReport r;
  const TraceInfo& info = a.info;
  r.info = &info;
  r.group_by = GroupingName(options.grouping);
  r.model = &a.model;
  r.history = &h;
  r.pinned = &a.pinned;
  r.owners = &a.owners;
  r.driver_memory = &a.driver_memory;
  r.snapshot_stacks = options.snapshot_stacks;
  StackCatalog catalog(a, options.grouping, &r.stacks);

  // Snapshots: evenly spaced moments, then each peak of a device total or host memory, then failed allocations.
  for (const Moment& m : h.moments) {
    PageSnapshot s{m.time_ns, "moment", {}};
    for (const MomentScope& scope : m.scopes) {
      s.scopes.push_back({scope.device, scope.series, &scope.live});
      catalog.AddScope(scope.live, options.snapshot_stacks);
    }
    r.snapshots.push_back(std::move(s));
  }
  for (const PeakResult& p : a.peaks) {
    PagePeak peak{p.device, p.series, info.Relative(p.counter.peak.time_ns), p.counter.peak_bytes,
                  p.counter.peak_count, p.counter.bytes, -1};
    const bool drawn = p.series == kDeviceTotalSeries || IsHostMemory(static_cast<format::Kind>(p.series));
    if (drawn && p.at_peak.taken) {
      peak.snapshot = static_cast<int64_t>(r.snapshots.size());
      r.snapshots.push_back({peak.time_ns, "peak", {{p.device, p.series, &p.at_peak}}});
      catalog.AddScope(p.at_peak, options.snapshot_stacks);
    }
    r.peaks.push_back(peak);
  }
  const size_t marked = std::min(a.ooms.size(), options.ooms);
  for (size_t i = 0; i < marked; ++i) {
    const OomRecord& o = a.ooms[i];
    const Event& e = o.event;
    PageOom oom{info.Relative(e.time_ns), e.device, format::KindName(e.info->kind), e.info->name, e.size,
                CudaErrorString(e.result), e.has_mem_info, e.free_bytes, e.total_bytes, o.live_bytes,
                info.ThreadName(e.thread), e.stack, -1};
    if (o.live_by_stack.taken) {
      const bool host = o.scope.scope == SnapshotFilter::Scope::kHostMemory;
      oom.snapshot = static_cast<int64_t>(r.snapshots.size());
      r.snapshots.push_back({oom.time_ns, "oom",
                             {{host ? format::kHostDevice : o.scope.device,
                               host ? static_cast<int>(format::Kind::kPinnedHost) : o.scope.series,
                               &o.live_by_stack}}});
      catalog.AddScope(o.live_by_stack, options.snapshot_stacks);
    }
    r.ooms.push_back(std::move(oom));
  }
  for (const PageOom& o : r.ooms) catalog.Add(o.stack);
  r.oom_count = a.oom_count;
  if (a.oom_count > marked) {
    r.caps.push_back(absl::StrCat("the first ", marked, " of ", a.oom_count, " failed allocations are marked"));
  }

  // The program's phases (NVTX ranges), drawn as bands behind the timeline: the outermost ranges of each thread.
  for (const PhaseRange& range : a.phases.ranges) {
    if (range.path != range.name || r.phases.size() == options.phase_bands) continue;
    r.phases.push_back({range.name, info.Relative(range.begin_ns), info.Relative(range.end_ns)});
  }

  size_t listed = 0;
  for (const LeakGroup& g : a.leaks) {
    if (!IsMemoryKind(g.kind)) continue;
    if (listed++ == options.leaks) {
      r.caps.push_back(absl::StrCat("the largest ", options.leaks, " stacks live at the end are listed"));
      break;
    }
    r.leaks.push_back({g.device, format::KindName(g.kind), g.bytes, g.count, g.growth, g.stack});
    catalog.Add(g.stack);
  }

  std::vector<const PinnedWindow*> windows;
  for (const PinnedWindow& pw : a.pinned.windows) {
    if (pw.rise_bytes > 0) windows.push_back(&pw);
  }
  std::stable_sort(windows.begin(), windows.end(),
                   [](const PinnedWindow* x, const PinnedWindow* y) { return x->rise_bytes > y->rise_bytes; });
  if (windows.size() > options.pinned_windows) windows.resize(options.pinned_windows);
  for (const PinnedWindow* pw : windows) {
    PageSpike s{pw->start_ns, pw->end_ns, pw->rise_bytes, pw->max_bytes, info.ThreadName(pw->top_thread),
                pw->top_thread, pw->top_allocated_bytes, std::nullopt};
    if (pw->top_allocated_bytes != 0) {
      s.stack = pw->top_stack;
      catalog.Add(pw->top_stack);
    }
    r.spikes.push_back(std::move(s));
  }

  if (h.driver_dropped > 0) {
    r.caps.push_back(absl::StrCat("the first ", h.driver.size(), " driver samples are drawn (", h.driver_dropped,
                                  " more in the trace)"));
  }
  r.caps.push_back(absl::StrCat("timelines drawn from ", h.buckets, " buckets each (min and max exact per bucket)"));
  r.caps.push_back(absl::StrCat("each snapshot lists its largest ", options.snapshot_stacks,
                                " stacks; the rest is one 'other' entry"));
  return r;
}

}  // namespace cumemtrace::analyzer
