// Grouping live allocations by stack. Must never depend on hash-map iteration order: groups are sorted totally.
#include "analyzer/model/stack_groups.h"

#include <algorithm>


namespace cumemtrace::analyzer {

SnapshotFilter MemoryScopeOf(int32_t device, format::Kind kind) {
  SnapshotFilter f;
  if (IsHostMemory(kind)) {
    f.scope = SnapshotFilter::Scope::kHostMemory;
  } else {
    f.scope = SnapshotFilter::Scope::kSeries;
    f.device = device;
    f.series = kDeviceTotalSeries;
  }
  return f;
}

void SortGroups(std::vector<StackGroup>& groups) {
  std::sort(groups.begin(), groups.end(), [](const StackGroup& a, const StackGroup& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.count != b.count) return a.count > b.count;
    return a.stack < b.stack;
  });
}

GroupedSnapshot FinishGroups(const absl::flat_hash_map<uint64_t, StackGroup>& by_stack, size_t max_groups) {
  GroupedSnapshot out;
  out.taken = true;
  out.groups.reserve(by_stack.size());
  for (const auto& [stack, group] : by_stack) {
    out.groups.push_back(group);
    out.total_bytes += group.bytes;
    out.total_count += group.count;
  }
  out.group_count = out.groups.size();
  SortGroups(out.groups);
  if (out.groups.size() > max_groups) out.groups.resize(max_groups);
  return out;
}

GroupedSnapshot GroupLive(const LiveSet& live, const SnapshotFilter& filter, size_t max_groups) {
  absl::flat_hash_map<uint64_t, StackGroup> by_stack;
  live.ForEach([&](uint64_t, const Allocation& a) {
    if (!filter.Matches(a)) return;
    StackGroup& g = by_stack[a.stack];
    g.stack = a.stack;
    g.bytes += a.size;
    ++g.count;
  });
  return FinishGroups(by_stack, max_groups);
}

}  // namespace cumemtrace::analyzer
