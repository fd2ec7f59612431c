// Grouping live allocations by stack, then by key. Must never depend on hash-map iteration order: groups are sorted
// totally.
#include "analyzer/model/stacks/grouped_snapshot.h"

#include <algorithm>

namespace cumemtrace::analyzer {
namespace {

// x is a larger stack than y: bytes, then count, then the lower id.
bool LargerStack(const StackGroup& x, const StackGroup& y) {
  if (x.bytes != y.bytes) return x.bytes > y.bytes;
  if (x.count != y.count) return x.count > y.count;
  return x.stack < y.stack;
}

GroupedSnapshot Finish(std::vector<StackGroup> per_stack, size_t max_groups, const StackGrouper* grouper) {
  GroupedSnapshot out;
  out.taken = true;
  for (const StackGroup& g : per_stack) {
    out.total_bytes += g.bytes;
    out.total_count += g.count;
  }
  out.groups = MergeByKey(std::move(per_stack), grouper);
  out.group_count = out.groups.size();
  SortGroups(out.groups);
  if (out.groups.size() > max_groups) out.groups.resize(max_groups);
  return out;
}

}  // namespace

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
    if (!(a.key == b.key)) return a.key < b.key;
    return a.stack < b.stack;
  });
}

std::vector<StackGroup> MergeByKey(std::vector<StackGroup> per_stack, const StackGrouper* grouper) {
  if (grouper == nullptr || grouper->options().by == GroupBy::kStack) {
    for (StackGroup& g : per_stack) g.key = GroupKey{GroupKey::Kind::kStack, g.stack};
    return per_stack;
  }
  absl::flat_hash_map<uint64_t, const StackGroup*> member;  // stack id -> its own sums (stacks are unique here)
  for (const StackGroup& s : per_stack) member[s.stack] = &s;
  absl::flat_hash_map<GroupKey, StackGroup> by_key;
  for (const StackGroup& s : per_stack) {
    const GroupKey key = grouper->KeyOf(s.stack);
    auto [it, inserted] = by_key.try_emplace(key, s);
    StackGroup& g = it->second;
    g.key = key;
    if (inserted) continue;
    // g.stack stays the largest member: compare the member against the largest so far, not against the sums.
    if (LargerStack(s, *member[g.stack])) g.stack = s.stack;
    g.bytes += s.bytes;
    g.count += s.count;
    g.stacks += s.stacks;
  }
  std::vector<StackGroup> out;
  out.reserve(by_key.size());
  for (auto& [key, g] : by_key) out.push_back(g);
  return out;
}

GroupedSnapshot FinishGroups(const absl::flat_hash_map<uint64_t, StackGroup>& by_stack, size_t max_groups,
                             const StackGrouper* grouper) {
  std::vector<StackGroup> per_stack;
  per_stack.reserve(by_stack.size());
  for (const auto& [stack, group] : by_stack) per_stack.push_back(group);
  return Finish(std::move(per_stack), max_groups, grouper);
}

GroupedSnapshot Regroup(const GroupedSnapshot& by_stack, size_t max_groups, const StackGrouper* grouper) {
  if (!by_stack.taken) return by_stack;
  GroupedSnapshot out = Finish(by_stack.groups, max_groups, grouper);
  // A snapshot capped before merging keeps its totals: what it dropped is still part of them.
  out.total_bytes = by_stack.total_bytes;
  out.total_count = by_stack.total_count;
  if (by_stack.group_count > by_stack.groups.size()) {
    out.group_count += by_stack.group_count - by_stack.groups.size();
  }
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
