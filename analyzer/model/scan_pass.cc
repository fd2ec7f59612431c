// ScanPass and PinnedPass (see scan_pass.h). Must never keep anything per event: only per live allocation, per
// stack, and the bounded lists of failed allocations and pinned changes.
#include "analyzer/model/scan_pass.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "analyzer/usable_cpus.h"

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

struct LeakGroupKey {
  int32_t device;
  format::Kind kind;
  GroupKey key;
  bool pytorch_cache;
  bool operator==(const LeakGroupKey& o) const {
    return device == o.device && kind == o.kind && key == o.key && pytorch_cache == o.pytorch_cache;
  }
  template <typename H>
  friend H AbslHashValue(H h, const LeakGroupKey& k) {
    return H::combine(std::move(h), k.device, k.kind, k.key, k.pytorch_cache);
  }
};

// Leaks are listed memory first (tensors count as memory: they are what a PyTorch program leaks), then the cache
// PyTorch kept, then what only looks like memory (address space, mappings of memory already counted).
int LeakRank(const LeakGroup& g) {
  if (g.pytorch_cache) return 1;
  if (IsMemoryKind(g.kind) || g.kind == format::Kind::kTorchBlock) return 0;
  return 2;
}

using TensorsByStack = absl::flat_hash_map<uint64_t, StackGroup>;

void AddTensor(TensorsByStack& by_stack, uint64_t stack, uint64_t size) {
  StackGroup& g = by_stack[stack];
  g.stack = stack;
  g.key.value = stack;
  g.bytes += size;
  ++g.count;
}

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

LayerThread::Mode ScanPass::LayerThreadMode(LayerThreading threading) {
  switch (threading) {
    case LayerThreading::kOwnThread:
      return LayerThread::Mode::kOwnThread;
    case LayerThreading::kShared:
      return LayerThread::Mode::kShared;
    case LayerThreading::kInline:
      return LayerThread::Mode::kInline;
    case LayerThreading::kAuto:
      break;
  }
  // Three busy threads on two cores only take turns (measured on the development VM: no faster than inline); there
  // the reader's thread applies the layer's batches in the time it spent waiting. One CPU: nothing overlaps.
  const unsigned cpus = UsableCpus();
  return cpus > 2 ? LayerThread::Mode::kOwnThread : cpus == 2 ? LayerThread::Mode::kShared : LayerThread::Mode::kInline;
}

void ScanPass::OnPhase(const PhaseInfo& phase) {
  if (!phases_.active()) {
    // The first phase: its packet may come after events the replay has already applied without the tracker (the
    // preload writes a range opened after a batch was sealed behind that batch). A phase opening next opens with
    // what they left.
    layer_.RunInline();
    std::vector<std::pair<int32_t, TorchBytes>> devices;
    for (const TorchDeviceStats* d : layer_.layer().Devices()) {
      devices.emplace_back(d->device, layer_.layer().Bytes(d->device));
    }
    phases_.CatchUp(last_event_, devices);
  }
  phases_.Add(phase);
}

void ScanPass::OnReadProgress(uint64_t bytes_read, uint64_t file_bytes) {
  if (file_bytes == 0) return;
  read_fraction_ = std::min(1.0, static_cast<double>(bytes_read) / static_cast<double>(file_bytes));
}

void ScanPass::OnEvent(const Event& event) {
  const uint64_t index = model_.next_index();
  if (phases_.active()) phases_.Before(event, index, a_.info.header.start_time_ns, model_.mutable_timelines());
  After(event, model_.Apply(event), index);
}

void ScanPass::OnEvents(absl::Span<const Event> events) {
  if (phases_.active()) {  // phase transitions go between events: no look-ahead
    for (const Event& e : events) OnEvent(e);
    if (options_.progress) options_.progress(model_.stats().events, read_fraction_);
    return;
  }
  model_.ApplyAll(events, [this](const Event& e, const Outcome& o, uint64_t index) { After(e, o, index); });
  if (options_.progress) options_.progress(model_.stats().events, read_fraction_);
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
  // Stacks are merged only at the end (Finish), when symbols are known: until then every stack is kept.
  const size_t cap = options_.grouping.by == GroupBy::kStack ? options_.max_groups : SIZE_MAX;
  r.live_by_stack = GroupLive(model_.live(), r.scope, cap);
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
  r.phase = phases_.CurrentPhase(event.thread);
  r.live_bytes = LiveBytesIn(model_.timelines(), r.scope, &r.live_count);
  const bool pytorch_device = layer_.layer().Find(event.device) != nullptr;
  if (pytorch_device && !IsHostMemory(event.info->kind) && IsPytorchStack(event.stack)) {
    r.has_torch = true;
    r.torch = AtFailure(event.device);
    torch_failures_pending_[event.device].push_back(event.seq);
  }
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

void ScanPass::OnAllocatorAttach(const AllocatorAttachInfo& attach) {
  AllocatorResult& r = a_.allocator;
  if (r.attached) return;  // one tracker per process: a second attach changes nothing
  r.attached = true;
  r.attach = attach;
  r.config = ParseAllocatorConfig(attach.config);
  layer_.layer().SetConfig(r.config);
}

TorchAtFailure ScanPass::AtFailure(int32_t device) {
  TorchAtFailure at;
  at.figures = layer_.layer().Figures(device);
  at.traced_device_bytes = owners_.DeviceBytes(device);
  for (const auto& [owner, bytes] : owners_.LiveOwners(device)) {
    if (owners_.Name(owner).slug == "pytorch") continue;
    at.outside.push_back(OutsideOwner{owners_.Name(owner), bytes});
  }
  return at;
}

std::vector<AutogradTensor> ScanPass::LiveAutogradTensors(int32_t device) {
  std::vector<AutogradTensor> live;
  layer_.layer().ForEachTensor(device, [&](int32_t, uint64_t, const TorchBlock& b) {
    live.push_back({b.stack, b.size, b.autograd});
  });
  return live;
}

bool ScanPass::EngineThread(ThreadScan& scan, uint32_t thread) {
  if (scan.engine < 0) scan.engine = IsAutogradEngineThread(a_.info.ThreadName(thread)) ? 1 : 0;
  return scan.engine == 1;
}

void ScanPass::ApplyTorch(const Event& event, uint64_t index) {
  a_.allocator.events = true;
  if (event.api != format::Api::kTorchFreeRequested) ++a_.allocator.replay_steps;
  AutogradStamp stamp;
  ThreadScan& thread = Thread(event.thread);  // one lookup for the event (the vector does not move until the next)
  if (format::IsTorchBlockAlloc(event.api)) {
    const bool engine = EngineThread(thread, event.thread);
    stamp = autograd_.OnBlockAlloc(event.api, engine, event.thread, event.stack);
    if (!engine && detect_phases_) {
      step_phases_.OnProgramRequest(event.seq, thread.request_boundary, event.time_ns, event.thread, event.stack,
                                    stamp.epoch, false);
    }
  } else if (event.api == format::Api::kTorchOom && detect_phases_ && !EngineThread(thread, event.thread)) {
    step_phases_.OnProgramRequest(event.seq, thread.request_boundary, event.time_ns, event.thread, event.stack,
                                  autograd_.passes(), true);
  }
  if (detect_phases_ && (format::IsTorchBlockAlloc(event.api) || event.api == format::Api::kTorchOom ||
                         event.info->space == format::Space::kTorchBlock)) {
    thread.request_boundary = event.seq;  // the thread's next request begins after this
  }
  // Phases need the tensors' bytes after every event: from the first phase on, the layer runs on this thread.
  if (phases_.active()) layer_.RunInline();
  layer_.Apply(event, index, stamp);
  if (phases_.active()) {
    const bool grew = format::IsTorchBlockAlloc(event.api) || event.api == format::Api::kTorchSegmentAlloc ||
                      event.api == format::Api::kTorchSegmentMap;
    phases_.Torch(event.device, layer_.layer().Bytes(event.device), grew);
  }
  // Nearly every event is a block allocation, and failures are rare: look only when one is waiting (a device's
  // entry goes once its failures are settled).
  if (!torch_failures_pending_.empty() &&
      (format::IsTorchBlockAlloc(event.api) || event.api == format::Api::kTorchOom)) {
    if (auto pending = torch_failures_pending_.find(event.device); pending != torch_failures_pending_.end()) {
      if (format::IsTorchBlockAlloc(event.api)) {
        torch_failures_recovered_.insert(pending->second.begin(), pending->second.end());
      }
      torch_failures_pending_.erase(pending);
    }
  }
  if (event.api != format::Api::kTorchOom) return;
  ++a_.allocator.oom_count;
  if (a_.allocator.ooms.size() >= kMaxTorchOoms) return;
  TorchOomRecord r;
  r.event = event;
  r.index = index;
  if (auto it = a_.info.devices.find(event.device); it != a_.info.devices.end()) {
    r.device_total_bytes = it->second.total_memory;
  }
  r.at = AtFailure(event.device);
  // Every stack for now (merged by the groupers in FinishAllocator, once symbols are known).
  TensorsByStack by_stack;
  layer_.layer().ForEachTensor(event.device, [&](int32_t, uint64_t, const TorchBlock& b) {
    AddTensor(by_stack, b.stack, b.size);
  });
  r.tensors = FinishGroups(by_stack, SIZE_MAX);
  r.retention = autograd_.JudgeRetention(LiveAutogradTensors(event.device), autograd_.passes());
  a_.allocator.ooms.push_back(std::move(r));
}

void ScanPass::FinishAllocator() {
  AllocatorResult& r = a_.allocator;
  AllocatorLayer& layer = layer_.layer();
  for (const TorchDeviceStats* s : layer.Devices()) {
    TorchDeviceResult d;
    d.stats = *s;
    d.stats.freed_since_allocated_peak.clear();
    d.stats.freed_since_reserved_peak.clear();
    d.at_end = layer.Figures(s->device);
    TensorsByStack at_allocated, at_reserved;
    std::vector<AutogradTensor> live_at_allocated_peak;
    const uint64_t allocated_peak = s->allocated_bytes.peak_at.index;
    const uint64_t reserved_peak = s->reserved_bytes.peak_at.index;
    layer.ForEachTensor(s->device, [&](int32_t, uint64_t, const TorchBlock& b) {
      if (s->allocated_bytes.peak != 0 && b.index <= allocated_peak) {
        AddTensor(at_allocated, b.stack, b.size);
        live_at_allocated_peak.push_back({b.stack, b.size, b.autograd});
      }
      if (s->reserved_bytes.peak != 0 && b.index <= reserved_peak) AddTensor(at_reserved, b.stack, b.size);
    });
    for (const TorchTensor& t : s->freed_since_allocated_peak) {
      AddTensor(at_allocated, t.stack, t.size);
      live_at_allocated_peak.push_back({t.stack, t.size, t.autograd});
    }
    for (const TorchTensor& t : s->freed_since_reserved_peak) AddTensor(at_reserved, t.stack, t.size);
    if (s->allocated_bytes.peak != 0) {
      d.at_allocated_peak = FinishGroups(at_allocated, options_.max_groups, a_.grouper.get());
      // Judged with the passes counted to the end: a pass after the peak shows the peak's code was followed.
      d.retention_at_allocated_peak =
          autograd_.JudgeRetention(live_at_allocated_peak, layer_.PassesAtAllocatedPeak(s->device));
    }
    if (s->reserved_bytes.peak != 0) {
      d.at_reserved_peak = FinishGroups(at_reserved, options_.max_groups, a_.grouper.get());
    }
    r.mismatches += s->mismatches;
    r.estimated_blocks += s->estimated_blocks;
    r.predating_frees += s->predating_frees;
    r.devices.push_back(std::move(d));
  }
  for (TorchOomRecord& o : r.ooms) {
    o.tensors_by_python = Regroup(o.tensors, options_.max_groups, a_.python_grouper.get());
    o.tensors = Regroup(o.tensors, options_.max_groups, a_.grouper.get());
  }
}

void PinnedPass::OnEvent(const Event& event) {
  if (model_.next_index() >= event_limit_) return;
  tracker_.OnEvent(event, model_.Apply(event));
}

void ScanPass::FinishLeaks() {
  // Per stack first (so that each group knows its largest stack), then merged by key.
  absl::flat_hash_map<LeakKey, LeakGroup> by_stack;
  // Quarters of the span in which events happened: the time a process spends after its last event (its teardown,
  // the preload writing symbols and lines at exit) would otherwise squeeze a whole loop into the first quarter.
  const AllocatorLayer& layer = layer_.layer();
  const int64_t start = a_.info.has_events ? a_.info.first_event_time_ns : a_.info.StartNs();
  const int64_t duration = a_.info.has_events ? SaturatingSub(a_.info.last_event_time_ns, start) : a_.info.DurationNs();
  std::array<int64_t, kGrowthPoints> at{};  // the times the growth points are taken (the last: the end)
  for (int i = 0; i < kGrowthPoints; ++i) {
    at[i] = start + static_cast<int64_t>(static_cast<__int128>(duration) * (i + 1) / kGrowthPoints);
  }
  model_.live().ForEach([&](uint64_t, const Allocation& alloc) {
    if (!phases_.Inside(alloc.index)) return;  // --phase / --window: made inside it
    LeakGroup& g = by_stack[LeakKey{alloc.device, alloc.kind, alloc.stack}];
    if (g.count == 0) g.phase = phases_.PhaseAt(alloc.index);
    g.device = alloc.device;
    g.kind = alloc.kind;
    g.stack = alloc.stack;
    g.pytorch_cache = layer.Find(alloc.device) != nullptr && !IsHostMemory(alloc.kind) &&
                      alloc.kind != format::Kind::kTorchBlock && IsPytorchStack(alloc.stack);
    g.bytes += alloc.size;
    ++g.count;
    for (int i = 0; i < kGrowthPoints; ++i) {
      if (i == kGrowthPoints - 1 || alloc.time_ns <= at[i]) g.growth[i] += alloc.size;
    }
  });
  auto larger_stack = [](const LeakGroup& x, const LeakGroup& y) {
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    if (x.count != y.count) return x.count > y.count;
    return x.stack < y.stack;
  };
  absl::flat_hash_map<LeakGroupKey, LeakGroup> groups;
  for (const auto& [k, s] : by_stack) {
    const GroupKey key = a_.grouper->KeyOf(s.stack);
    auto [it, inserted] = groups.try_emplace(LeakGroupKey{s.device, s.kind, key, s.pytorch_cache}, s);
    LeakGroup& g = it->second;
    g.key = key;
    if (inserted) continue;
    if (larger_stack(s, by_stack.find(LeakKey{s.device, s.kind, g.stack})->second)) g.stack = s.stack;
    g.bytes += s.bytes;
    g.count += s.count;
    g.stacks += s.stacks;
    for (int i = 0; i < kGrowthPoints; ++i) g.growth[i] += s.growth[i];
  }
  a_.leaks.reserve(groups.size());
  for (auto& [key, group] : groups) a_.leaks.push_back(group);
  // Memory first, then what only looks like memory (address space, mappings of memory already counted): a large
  // address reservation must not push real leaks off the list (LeakRank).
  std::sort(a_.leaks.begin(), a_.leaks.end(), [](const LeakGroup& x, const LeakGroup& y) {
    if (LeakRank(x) != LeakRank(y)) return LeakRank(x) < LeakRank(y);
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    if (x.count != y.count) return x.count > y.count;
    if (x.device != y.device) return x.device < y.device;
    if (x.kind != y.kind) return x.kind < y.kind;
    if (!(x.key == y.key)) return x.key < y.key;
    return x.stack < y.stack;
  });
  for (const DeviceSeries* d : model_.timelines().Devices()) {
    for (int kind = 1; kind < format::kNumKinds; ++kind) {
      const Series& s = d->series[kind];
      if (s.count == 0 && s.bytes == 0) continue;
      a_.leak_totals.push_back(LeakTotal{d->device, static_cast<format::Kind>(kind), s.bytes, s.count});
    }
  }
}

bool ScanPass::Finish() {
  if (detect_phases_ && !phases_.seen_any()) {  // no NVTX ranges: training and validation as backward passes show
    a_.detected_phases = step_phases_.Finish(autograd_.passes(), a_.info.StartNs());
  }
  a_.phases = phases_.Finish(a_.info.StartNs() + a_.info.DurationNs(), model_.next_index(),
                             model_.mutable_timelines());
  a_.model = model_.stats();
  a_.owners = owners_.Results();
  a_.driver_memory = driver_.Finish(owners_);
  for (const auto& [key, total] : allocation_totals_) {
    AllocationTotal t = total;
    std::tie(t.device, t.kind, t.stack) = key;
    a_.allocation_totals.push_back(t);
  }
  std::sort(a_.allocation_totals.begin(), a_.allocation_totals.end(), [](const AllocationTotal& x,
                                                                         const AllocationTotal& y) {
    return std::tie(x.device, x.kind, x.stack) < std::tie(y.device, y.kind, y.stack);
  });

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
  a_.grouper = std::make_unique<StackGrouper>(a_.stacks, a_.symbols, a_.python_frames, a_.info.header.executable,
                                              options_.grouping);
  a_.python_grouper = std::make_unique<StackGrouper>(a_.stacks, a_.symbols, a_.python_frames,
                                                     a_.info.header.executable, GroupingOptions{GroupBy::kPython, ""});
  if (options_.peak_snapshots) {
    GroupAtPeaks(model_.live(), model_.timelines(), options_.max_groups, a_.grouper.get(),
                 [this](int32_t device, int series, GroupedSnapshot snapshot) {
                   for (PeakResult& p : a_.peaks) {
                     if (p.device == device && p.series == series) p.at_peak = std::move(snapshot);
                   }
                 });
  }
  FinishLeaks();
  FinishAllocator();

  for (std::deque<OomRecord>::iterator it = last_ooms_.begin(); it != last_ooms_.end(); ++it) {
    it->recovered = torch_failures_recovered_.contains(it->event.seq);
  }
  for (OomRecord& r : first_ooms_) r.recovered = torch_failures_recovered_.contains(r.event.seq);
  a_.ooms = std::move(first_ooms_);
  a_.ooms.insert(a_.ooms.end(), std::make_move_iterator(last_ooms_.begin()),
                 std::make_move_iterator(last_ooms_.end()));
  last_ooms_.clear();
  if (options_.grouping.by != GroupBy::kStack) {
    for (OomRecord& r : a_.ooms) r.live_by_stack = Regroup(r.live_by_stack, options_.max_groups, a_.grouper.get());
  }

  if (!options_.pinned || pinned_overflow_) return !options_.pinned;
  PinnedTracker tracker(a_.info.StartNs(), a_.info.DurationNs());
  for (const PinnedChange& c : pinned_log_) tracker.Apply(c);
  a_.pinned = tracker.Finish(a_.grouper.get());
  return true;
}

}  // namespace cumemtrace::analyzer
