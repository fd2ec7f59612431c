// ScanPass and PinnedPass (see scan_pass.h). Must never keep anything per event: only per live allocation, per
// stack, and the bounded lists of failed allocations and pinned changes.
#include "analyzer/model/scan_pass.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace cumemtrace::analyzer {
namespace {

struct LeakKey {
  int32_t device;
  format::Kind kind;
  uint64_t stack;
  bool operator==(const LeakKey& o) const { return device == o.device && kind == o.kind && stack == o.stack; }
  template <typename H>
  friend H AbslHashValue(H h, const LeakKey& k) {
    return H::combine(std::move(h), k.device, k.kind, k.stack);
  }
};

uint64_t LiveBytesIn(const Timelines& timelines, const SnapshotFilter& scope, uint64_t* count) {
  uint64_t bytes = 0;
  *count = 0;
  if (scope.scope == SnapshotFilter::Scope::kHostMemory) {
    for (const DeviceSeries* d : timelines.Devices()) {
      for (format::Kind k : {format::Kind::kPinnedHost, format::Kind::kRegisteredHost}) {
        bytes += d->series[static_cast<int>(k)].bytes;
        *count += d->series[static_cast<int>(k)].count;
      }
    }
    return bytes;
  }
  if (const Series* s = timelines.Find(scope.device, scope.series); s != nullptr) {
    bytes = s->bytes;
    *count = s->count;
  }
  return bytes;
}

bool SameScope(const SnapshotFilter& a, const SnapshotFilter& b) {
  return a.scope == b.scope && a.device == b.device && a.series == b.series;
}

}  // namespace

void ScanPass::OnEvent(const Event& event) {
  const uint64_t index = model_.next_index();
  After(event, model_.Apply(event), index);
}

void ScanPass::OnEvents(absl::Span<const Event> events) {
  model_.ApplyAll(events, [this](const Event& e, const Outcome& o, uint64_t index) { After(e, o, index); });
}

void ScanPass::LogPinned(const Event& event, const Outcome& outcome) {
  PinnedChange changes[2];
  const int n = PinnedChanges(event, outcome, changes);
  if (n == 0) return;
  if (pinned_log_.size() + n > options_.max_pinned_log) {
    pinned_overflow_ = true;
    pinned_log_.clear();
    pinned_log_.shrink_to_fit();
    return;
  }
  pinned_log_.insert(pinned_log_.end(), changes, changes + n);
}

void ScanPass::SnapshotOom(OomRecord& r, uint64_t index) {
  if (!options_.oom_snapshots) return;
  const ModelStats& stats = model_.stats();
  const uint64_t version = stats.allocations + stats.frees;  // changes with every insert and removal
  const bool unchanged =
      have_last_snapshot_ && version == last_snapshot_version_ && SameScope(r.scope, last_snapshot_scope_);
  if (unchanged) {
    r.live_by_stack = last_snapshot_;
    return;
  }
  const bool early = a_.oom_count <= options_.oom_snapshot_first;
  const bool paid_for = !have_last_snapshot_ || index - last_snapshot_index_ >= model_.live().size();
  if (!early && !paid_for) return;
  r.live_by_stack = GroupLive(model_.live(), r.scope, options_.max_groups);
  have_last_snapshot_ = true;
  last_snapshot_index_ = index;
  last_snapshot_version_ = version;
  last_snapshot_scope_ = r.scope;
  last_snapshot_ = r.live_by_stack;
}

void ScanPass::KeepOom(const Event& event, uint64_t index) {
  ++a_.oom_count;
  OomRecord r;
  r.event = event;
  r.index = index;
  r.scope = MemoryScopeOf(event.device, event.info->kind);
  r.live_bytes = LiveBytesIn(model_.timelines(), r.scope, &r.live_count);
  SnapshotOom(r, index);
  const size_t first_cap = options_.max_oom_records - options_.max_oom_records / 2;
  const size_t last_cap = options_.max_oom_records / 2;
  if (first_ooms_.size() < first_cap) {
    first_ooms_.push_back(std::move(r));
  } else if (last_cap != 0) {
    if (last_ooms_.size() == last_cap) last_ooms_.pop_front();
    last_ooms_.push_back(std::move(r));
  }
}

void PinnedPass::OnEvent(const Event& event) {
  if (model_.next_index() >= event_limit_) return;
  tracker_.OnEvent(event, model_.Apply(event));
}

bool ScanPass::Finish() {
  a_.model = model_.stats();
  a_.owners = owners_.Results();
  a_.driver_memory = driver_.Finish(owners_);

  for (const DeviceSeries* d : model_.timelines().Devices()) {
    for (int series = 1; series < kNumSeries; ++series) {
      const Series& s = d->series[series];
      if (s.allocations == 0) continue;
      PeakResult p;
      p.device = d->device;
      p.series = series;
      p.counter = s;
      a_.peaks.push_back(std::move(p));
    }
  }
  if (options_.peak_snapshots) {
    GroupAtPeaks(model_.live(), model_.timelines(), options_.max_groups,
                 [this](int32_t device, int series, GroupedSnapshot snapshot) {
                   for (PeakResult& p : a_.peaks) {
                     if (p.device == device && p.series == series) p.at_peak = std::move(snapshot);
                   }
                 });
  }

  absl::flat_hash_map<LeakKey, LeakGroup> leaks;
  model_.live().ForEach([&](uint64_t, const Allocation& alloc) {
    LeakGroup& g = leaks[LeakKey{alloc.device, alloc.kind, alloc.stack}];
    g.device = alloc.device;
    g.kind = alloc.kind;
    g.stack = alloc.stack;
    g.bytes += alloc.size;
    ++g.count;
  });
  a_.leaks.reserve(leaks.size());
  for (auto& [key, group] : leaks) a_.leaks.push_back(group);
  // Memory first, then what only looks like memory (address space, mappings of memory already counted): a large
  // address reservation must not push real leaks off the list.
  std::sort(a_.leaks.begin(), a_.leaks.end(), [](const LeakGroup& x, const LeakGroup& y) {
    if (IsMemoryKind(x.kind) != IsMemoryKind(y.kind)) return IsMemoryKind(x.kind);
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    if (x.count != y.count) return x.count > y.count;
    if (x.device != y.device) return x.device < y.device;
    if (x.kind != y.kind) return x.kind < y.kind;
    return x.stack < y.stack;
  });
  for (const DeviceSeries* d : model_.timelines().Devices()) {
    for (int kind = 1; kind < format::kNumKinds; ++kind) {
      const Series& s = d->series[kind];
      if (s.count == 0 && s.bytes == 0) continue;
      a_.leak_totals.push_back(LeakTotal{d->device, static_cast<format::Kind>(kind), s.bytes, s.count});
    }
  }

  a_.ooms = std::move(first_ooms_);
  a_.ooms.insert(a_.ooms.end(), std::make_move_iterator(last_ooms_.begin()),
                 std::make_move_iterator(last_ooms_.end()));
  last_ooms_.clear();

  if (!options_.pinned || pinned_overflow_) return !options_.pinned;
  PinnedTracker tracker(a_.info.StartNs(), a_.info.DurationNs());
  for (const PinnedChange& c : pinned_log_) tracker.Apply(c);
  a_.pinned = tracker.Finish();
  return true;
}

}  // namespace cumemtrace::analyzer
