// Groups live allocations at one moment of a replay: "what was live, and who allocated it". Allocations are summed
// per stack, then (with a StackGrouper, see stack_grouper.h) stacks are merged into groups by their key. The result
// keeps the largest groups (bytes, then count, then key: a total order, so output is deterministic) and the totals
// of all of them, so a report can say how much the groups it does not print hold.
#ifndef CUMEMTRACE_ANALYZER_MODEL_STACKS_GROUPED_SNAPSHOT_H_
#define CUMEMTRACE_ANALYZER_MODEL_STACKS_GROUPED_SNAPSHOT_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "analyzer/model/memory/live_set.h"
#include "analyzer/model/stacks/stack_grouper.h"
#include "analyzer/model/memory/timelines.h"

namespace cumemtrace::analyzer {

struct StackGroup {
  uint64_t stack = 0;  // the group's largest stack (bytes, then count, then the lower id)
  uint64_t bytes = 0;
  uint64_t count = 0;
  GroupKey key;         // {kStack, stack} when not merged
  uint64_t stacks = 1;  // distinct stacks merged into the group
};

struct GroupedSnapshot {
  bool taken = false;
  std::vector<StackGroup> groups;  // largest first, at most the cap asked for
  uint64_t total_bytes = 0;        // over all groups, kept or not
  uint64_t total_count = 0;
  uint64_t group_count = 0;        // groups before the cap
};

// Which live allocations a snapshot takes.
struct SnapshotFilter {
  enum class Scope : uint8_t {
    kSeries,      // `device` and `series` (a kind, or kDeviceTotalSeries)
    kHostMemory,  // pinned_host and registered_host on any device
  };
  Scope scope = Scope::kSeries;
  int32_t device = 0;
  int series = 0;

  bool Matches(const Allocation& a) const {
    if (scope == Scope::kHostMemory) return IsHostMemory(a.kind);
    if (a.device != device) return false;
    return series == kDeviceTotalSeries ? InDeviceTotal(a.kind) : static_cast<int>(a.kind) == series;
  }
};

// The filter for "memory of the same place" as an allocation of `kind` on `device`: host memory for host kinds,
// else the device total of `device` (address_reserve and vmm_mapped too: their failures are about that device).
SnapshotFilter MemoryScopeOf(int32_t device, format::Kind kind);

// Sorts `groups` largest first (bytes, count, then key ascending).
void SortGroups(std::vector<StackGroup>& groups);

// One group per stack (no grouper applies here: snapshots taken during a read, before symbols are known, are
// grouped per stack and merged with Regroup at the end).
GroupedSnapshot GroupLive(const LiveSet& live, const SnapshotFilter& filter, size_t max_groups);

// Merges the per-stack groups of `by_stack` (one group per stack, complete: taken without a cap) by `grouper`'s
// keys; totals stay. `grouper` null: only sorts and caps.
GroupedSnapshot Regroup(const GroupedSnapshot& by_stack, size_t max_groups, const StackGrouper* grouper);

// Merges per-stack groups into groups by key (`grouper` null: unchanged), each keeping its largest stack.
std::vector<StackGroup> MergeByKey(std::vector<StackGroup> per_stack, const StackGrouper* grouper);

// What was live at the peak of each (device, series) with a peak, grouped by stack: the allocations still live
// that were allocated at or before the peak, plus those Timelines recorded as freed since. Calls
// out(device, series, snapshot) once per such series. Stacks are merged by `grouper` (null: one group per stack).
template <typename Out>
void GroupAtPeaks(const LiveSet& live, const Timelines& timelines, size_t max_groups, const StackGrouper* grouper,
                  Out&& out);

// Turns per-stack sums into a GroupedSnapshot (merged by `grouper` unless null, sorted, capped, with totals).
GroupedSnapshot FinishGroups(const absl::flat_hash_map<uint64_t, StackGroup>& by_stack, size_t max_groups,
                             const StackGrouper* grouper = nullptr);

template <typename Out>
void GroupAtPeaks(const LiveSet& live, const Timelines& timelines, size_t max_groups, const StackGrouper* grouper,
                  Out&& out) {
  using Groups = absl::flat_hash_map<uint64_t, StackGroup>;
  struct PerDevice {
    const DeviceSeries* d;
    std::array<Groups, kNumSeries> groups;
  };
  std::vector<PerDevice> devices;
  absl::flat_hash_map<int32_t, size_t> index;
  for (const DeviceSeries* d : timelines.Devices()) {
    index[d->device] = devices.size();
    devices.push_back(PerDevice{d, {}});
  }
  auto add = [](Groups& g, uint64_t stack, uint64_t size) {
    StackGroup& group = g[stack];
    group.stack = stack;
    group.key.value = stack;
    group.bytes += size;
    ++group.count;
  };
  auto at_peak = [](const Series& s, const Allocation& a) { return s.peak_bytes != 0 && a.index <= s.peak.index; };
  live.ForEach([&](uint64_t, const Allocation& a) {
    auto it = index.find(a.device);
    if (it == index.end()) return;
    PerDevice& p = devices[it->second];
    const int series = static_cast<int>(a.kind) % kNumSeries;
    if (at_peak(p.d->series[series], a)) add(p.groups[series], a.stack, a.size);
    if (InDeviceTotal(a.kind) && at_peak(p.d->series[kDeviceTotalSeries], a)) {
      add(p.groups[kDeviceTotalSeries], a.stack, a.size);
    }
  });
  for (PerDevice& p : devices) {
    for (int series = 1; series < kNumSeries; ++series) {
      if (p.d->series[series].peak_bytes == 0) continue;
      for (const FreedSincePeak& f : p.d->freed_since_peak[series]) add(p.groups[series], f.stack, f.size);
      out(p.d->device, series, FinishGroups(p.groups[series], max_groups, grouper));
    }
  }
}

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_STACKS_GROUPED_SNAPSHOT_H_
