// BuildDiffReport: totals matched by (device, series); groups by (device, series, symbolic identity). Groups of
// one trace that share an identity (two stacks whose user frames differ only in address) are summed.
#include "analyzer/reports/diff_report.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <tuple>

#include "analyzer/reports/symbolic_frame.h"

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kIdentityFrames = 256;

using TotalKey = std::pair<int32_t, int>;
using GroupMapKey = std::tuple<int32_t, int, std::string>;

// The identity of a group: the frame it is keyed by, or its whole stack.
std::string Identity(const GroupKey& key, uint64_t stack, FrameResolver& resolver) {
  if (key.kind != GroupKey::Kind::kStack) {
    std::string id = SymbolicKey(resolver.ResolvePc(key.value));
    return key.kind == GroupKey::Kind::kFallback ? "fallback:" + id : id;
  }
  return "stack:" + SymbolicStackKey(resolver.ResolveStack(stack, kIdentityFrames));
}

struct Side {
  const Analysis* analysis;
  FrameResolver* resolver;
  bool is_b;
};

void AddGroup(std::map<GroupMapKey, GroupDiff>& groups, const Side& side, int32_t device, int series,
              const GroupKey& key, uint64_t stack, uint64_t stacks, uint64_t bytes, uint64_t count,
              const ReportOptions& options) {
  const std::string identity = Identity(key, stack, *side.resolver);
  GroupDiff& g = groups[{device, series, identity}];
  g.device = device;
  g.kind = SeriesName(series);
  g.identity = identity;
  uint64_t& mine = side.is_b ? g.b_bytes : g.a_bytes;
  const bool larger = bytes > mine;
  mine += bytes;
  (side.is_b ? g.b_count : g.a_count) += count;
  // Frames from B when B has the group (the run people are looking at), from its largest stack.
  if ((side.is_b && (!g.in_b || larger)) || (!side.is_b && !g.in_b && (g.frames.empty() || larger))) {
    g.in_b = side.is_b;
    g.stack_id = stack;
    g.frames = side.resolver->ResolveStack(stack, options.frames);
    g.label = LabelGroup(key, stack, stacks, side.analysis->grouper.get(), *side.resolver);
  }
}

bool GroupedPeak(int series) {
  return series == kDeviceTotalSeries || IsHostMemory(static_cast<format::Kind>(series));
}

std::vector<GroupDiff> Ranked(std::map<GroupMapKey, GroupDiff>& groups, size_t top, uint64_t* changed) {
  std::vector<GroupDiff> out;
  for (auto& [key, g] : groups) {
    if (g.a_bytes != g.b_bytes || g.a_count != g.b_count) out.push_back(std::move(g));
  }
  // Largest change first; ties: growth before shrink, then by place and identity (deterministic).
  std::stable_sort(out.begin(), out.end(), [](const GroupDiff& x, const GroupDiff& y) {
    const uint64_t dx = static_cast<uint64_t>(std::llabs(x.change()));
    const uint64_t dy = static_cast<uint64_t>(std::llabs(y.change()));
    if (dx != dy) return dx > dy;
    return x.change() > y.change();
  });
  *changed = out.size();
  if (out.size() > top) out.resize(top);
  return out;
}

}  // namespace

DiffReport BuildDiffReport(const Analysis& a, FrameResolver& a_resolver, const Analysis& b,
                           FrameResolver& b_resolver, const ReportOptions& options) {
  DiffReport r;
  const Side sides[2] = {{&a, &a_resolver, false}, {&b, &b_resolver, true}};

  std::map<TotalKey, TotalDiff> peaks;
  std::map<TotalKey, TotalDiff> leaks;
  std::map<GroupMapKey, GroupDiff> peak_groups;
  std::map<GroupMapKey, GroupDiff> leak_groups;
  std::map<TotalKey, std::array<uint64_t, 4>> churn;  // a bytes, a count, b bytes, b count
  std::map<GroupMapKey, GroupDiff> churn_groups;
  for (const Side& side : sides) {
    const Analysis& x = *side.analysis;
    for (const PeakResult& p : x.peaks) {
      TotalDiff& t = peaks[{p.device, p.series}];
      t.device = p.device;
      t.kind = SeriesName(p.series);
      (side.is_b ? t.b_bytes : t.a_bytes) = p.counter.peak_bytes;
      if (!GroupedPeak(p.series) || !p.at_peak.taken) continue;
      for (const StackGroup& g : p.at_peak.groups) {
        AddGroup(peak_groups, side, p.device, p.series, g.key, g.stack, g.stacks, g.bytes, g.count, options);
      }
    }
    for (const LeakTotal& l : x.leak_totals) {
      TotalDiff& t = leaks[{l.device, static_cast<int>(l.kind)}];
      t.device = l.device;
      t.kind = format::KindName(l.kind);
      (side.is_b ? t.b_bytes : t.a_bytes) = l.bytes;
    }
    for (const LeakGroup& g : x.leaks) {
      AddGroup(leak_groups, side, g.device, static_cast<int>(g.kind), g.key, g.stack, g.stacks, g.bytes, g.count,
               options);
    }
    for (const AllocationTotal& t : x.allocation_totals) {
      std::array<uint64_t, 4>& c = churn[{t.device, static_cast<int>(t.kind)}];
      c[side.is_b ? 2 : 0] += t.bytes;
      c[side.is_b ? 3 : 1] += t.count;
      AddGroup(churn_groups, side, t.device, static_cast<int>(t.kind), x.grouper->KeyOf(t.stack), t.stack, 1,
               t.bytes, t.count, options);
    }
  }
  for (const auto& [key, c] : churn) {
    r.churn_totals.push_back(TotalDiff{key.first, format::KindName(static_cast<format::Kind>(key.second)), c[0], c[2]});
    r.churn_total_a_counts.push_back(c[1]);
    r.churn_total_b_counts.push_back(c[3]);
  }
  r.churn_groups = Ranked(churn_groups, options.top, &r.churn_group_count);
  for (auto& [key, t] : peaks) r.peaks.push_back(t);
  for (auto& [key, t] : leaks) r.leak_totals.push_back(t);
  r.leak_groups = Ranked(leak_groups, options.top, &r.leak_group_count);
  r.peak_groups = Ranked(peak_groups, options.top, &r.peak_group_count);
  return r;
}

}  // namespace cumemtrace::analyzer
