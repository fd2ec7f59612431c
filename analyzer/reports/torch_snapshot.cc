// BuildTorchSnapshot (see torch_snapshot.h): one pass that replays the torch.* events per device (blocks, segments,
// mapped ranges) and remembers the stack of each live driver allocation, then lays the blocks live at the end out
// over their segments.
#include "analyzer/reports/torch_snapshot.h"

#include <algorithm>
#include <iterator>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {
namespace {

using format::Api;

constexpr uint64_t kMinBlockSize = 512;          // PyTorch's kMinBlockSize
constexpr uint64_t kSmallSize = uint64_t{1} << 20;  // kSmallSize: larger requests go to the large pool
constexpr uint64_t kSmallBuffer = uint64_t{2} << 20;  // kSmallBuffer: the small pool's segment size

struct LiveBlock {
  uint64_t requested = 0;
  uint64_t stream = 0;
  uint64_t stack = 0;
  bool pending_free = false;
};

struct LiveSegment {
  uint64_t size = 0;  // for mapped ranges: the end address instead
  uint64_t stream = 0;
  uint64_t stack = 0;
};

struct DeviceState {
  std::map<uint64_t, LiveBlock> blocks;
  std::map<uint64_t, LiveSegment> segments;  // segment_alloc'd
  std::map<uint64_t, LiveSegment> mapped;    // expandable segments: start -> {end, stream, stack}
};

class SnapshotPass : public TraceVisitor {
 public:
  explicit SnapshotPass(TorchSnapshot& s) : s_(s) {}

  void OnHeader(const TraceHeader& header) override { s_.info.header = header; }
  void OnDevice(const DeviceInfo& device) override { s_.info.devices[device.ordinal] = device; }
  void OnThread(const ThreadInfo& thread) override { s_.info.threads[thread.index] = thread; }
  void OnModule(const ModuleInfo& module) override { s_.symbols.AddModule(module); }
  void OnStackNode(const StackNode& node) override { s_.stacks.Add(node); }
  void OnString(uint32_t id, const std::string& value) override { s_.symbols.AddString(id, value); }
  void OnSymbol(const SymbolInfo& symbol) override { s_.symbols.AddSymbol(symbol); }
  void OnPythonFrame(const PythonFrameInfo& frame) override { s_.python_frames.Add(frame); }
  void OnNotice(const NoticeInfo& notice) override { s_.info.notices.push_back(notice); }
  void OnTrailer(const TrailerInfo& trailer) override {
    s_.info.has_trailer = true;
    s_.info.trailer = trailer;
  }
  void OnEvent(const Event& e) override;

  // Lays out the segments live at the end.
  void Finish();

 private:
  struct SpaceAddress {
    format::Space space;
    uint64_t address;
    bool operator==(const SpaceAddress& o) const { return space == o.space && address == o.address; }
    template <typename H>
    friend H AbslHashValue(H h, const SpaceAddress& k) {
      return H::combine(std::move(h), k.space, k.address);
    }
  };

  int64_t TimeUs(int64_t time_ns) const {
    const TraceHeader& h = s_.info.header;
    const int64_t unix_ns = h.start_unix_time_ns != 0 ? h.start_unix_time_ns + (time_ns - h.start_time_ns) : time_ns;
    return unix_ns / 1000;
  }
  std::vector<SnapshotTraceEntry>& Trace(int32_t device) {
    const size_t d = static_cast<size_t>(std::max(device, 0));
    if (s_.device_traces.size() <= d) s_.device_traces.resize(d + 1);
    return s_.device_traces[d];
  }
  uint64_t DriverStack(format::Space space, uint64_t address) const {
    auto it = driver_stacks_.find(SpaceAddress{space, address});
    return it == driver_stacks_.end() ? 0 : it->second;
  }
  void TorchEvent(const Event& e);
  void Free(const Event& e, DeviceState& d, bool requested, bool completed);
  void Map(DeviceState& d, uint64_t start, uint64_t end, uint64_t stream, uint64_t stack);
  void Unmap(DeviceState& d, uint64_t start, uint64_t end);
  void LayOut(int32_t device, const DeviceState& d, uint64_t start, const LiveSegment& seg, uint64_t end,
              bool expandable);

  TorchSnapshot& s_;
  std::map<int32_t, DeviceState> devices_;
  // The stack of each live driver allocation and mapping, so that a segment gets the stack that made it.
  absl::flat_hash_map<SpaceAddress, uint64_t> driver_stacks_;
};

void SnapshotPass::OnEvent(const Event& e) {
  s_.info.NoteEventTime(e.time_ns);
  if (e.info->space == format::Space::kTorchBlock || e.info->space == format::Space::kTorchSegment) {
    TorchEvent(e);
    return;
  }
  if (e.result != 0) return;
  if (e.info->op == format::Op::kAlloc) {
    driver_stacks_[SpaceAddress{e.info->space, e.address}] = e.stack;
  } else if (e.info->op == format::Op::kFree) {
    driver_stacks_.erase(SpaceAddress{e.info->space, e.address});
  }
}

void SnapshotPass::Free(const Event& e, DeviceState& d, bool requested, bool completed) {
  SnapshotTraceEntry entry;
  entry.addr = e.address;
  entry.time_us = TimeUs(e.time_ns);
  auto it = d.blocks.find(e.address);
  if (it == d.blocks.end()) {
    // No size, no stack, and memory_viz's segment view fails on a free whose block it cannot find: left out.
    ++s_.unmatched_frees;
    return;
  }
  entry.size = it->second.requested;
  entry.stream = it->second.stream;
  entry.stack = it->second.stack;
  std::vector<SnapshotTraceEntry>& trace = Trace(e.device);
  if (requested) {
    entry.action = TraceAction::kFreeRequested;
    trace.push_back(entry);
    it->second.pending_free = true;
  }
  if (completed) {
    entry.action = TraceAction::kFreeCompleted;
    trace.push_back(entry);
    d.blocks.erase(it);
  }
}

void SnapshotPass::Map(DeviceState& d, uint64_t start, uint64_t end, uint64_t stream, uint64_t stack) {
  auto next = d.mapped.lower_bound(start);
  if (next != d.mapped.begin()) {
    auto prev = std::prev(next);
    if (prev->second.size == start && prev->second.stream == stream) {
      start = prev->first;
      stack = prev->second.stack;
      d.mapped.erase(prev);
    }
  }
  if (next != d.mapped.end() && next->first == end && next->second.stream == stream) {
    end = next->second.size;
    d.mapped.erase(next);
  }
  d.mapped[start] = LiveSegment{end, stream, stack};
}

void SnapshotPass::Unmap(DeviceState& d, uint64_t start, uint64_t end) {
  auto it = d.mapped.upper_bound(start);
  if (it != d.mapped.begin()) --it;
  while (it != d.mapped.end() && it->first < end) {
    const uint64_t r_start = it->first;
    const LiveSegment r = it->second;
    it = d.mapped.erase(it);
    if (r.size <= start) continue;
    if (r_start < start) d.mapped[r_start] = LiveSegment{start, r.stream, r.stack};
    if (end < r.size) d.mapped[end] = LiveSegment{r.size, r.stream, r.stack};
    it = d.mapped.lower_bound(end);
  }
}

void SnapshotPass::TorchEvent(const Event& e) {
  ++s_.torch_events;
  DeviceState& d = devices_[e.device];
  SnapshotTraceEntry entry;
  entry.addr = e.address;
  entry.size = e.size;
  entry.stream = e.stream;
  entry.time_us = TimeUs(e.time_ns);
  entry.stack = e.stack;
  switch (e.api) {
    case Api::kTorchAlloc:
      d.blocks[e.address] = LiveBlock{e.size, e.stream, e.stack, false};
      entry.action = TraceAction::kAlloc;
      break;
    case Api::kTorchFreeRequested: Free(e, d, true, false); return;
    case Api::kTorchFreeCompleted: Free(e, d, false, true); return;
    case Api::kTorchFree: Free(e, d, true, true); return;
    case Api::kTorchSegmentAlloc:
      entry.action = TraceAction::kSegmentAlloc;
      entry.stack = DriverStack(format::Space::kAllocation, e.address);
      d.segments[e.address] = LiveSegment{e.size, e.stream, entry.stack};
      break;
    case Api::kTorchSegmentFree:
      entry.action = TraceAction::kSegmentFree;
      if (auto it = d.segments.find(e.address); it != d.segments.end()) {
        entry.stack = it->second.stack;
        d.segments.erase(it);
      }
      break;
    case Api::kTorchSegmentMap:
      entry.action = TraceAction::kSegmentMap;
      entry.stack = DriverStack(format::Space::kVmmMapping, e.address);
      Map(d, e.address, e.address + e.size, e.stream, entry.stack);
      break;
    case Api::kTorchSegmentUnmap:
      entry.action = TraceAction::kSegmentUnmap;
      Unmap(d, e.address, e.address + e.size);
      break;
    case Api::kTorchOom:
      entry.action = TraceAction::kOom;
      entry.addr = e.aux;
      break;
    default: return;
  }
  Trace(e.device).push_back(entry);
}

void SnapshotPass::LayOut(int32_t device, const DeviceState& d, uint64_t start, const LiveSegment& seg,
                          uint64_t end, bool expandable) {
  SnapshotSegment out;
  out.device = device;
  out.address = start;
  out.total_size = end - start;
  out.stream = seg.stream;
  out.stack = seg.stack;
  out.is_expandable = expandable;
  out.large = expandable || out.total_size != kSmallBuffer;
  bool any_block = false;
  uint64_t cursor = start;
  for (auto it = d.blocks.lower_bound(start); it != d.blocks.end() && it->first < end; ++it) {
    const uint64_t address = it->first;
    const LiveBlock& b = it->second;
    auto next_it = std::next(it);
    const uint64_t next = (next_it != d.blocks.end() && next_it->first < end) ? next_it->first : end;
    if (address < cursor) continue;  // overlaps the block before: cannot be laid out (a stray block)
    if (address > cursor) out.blocks.push_back(SnapshotBlock{cursor, address - cursor, 0, BlockState::kInactive, 0});
    const uint64_t rounded = RoundedBlockSize(b.requested);
    const bool large_pool = rounded > kSmallSize;
    if (!any_block) out.large = large_pool;
    any_block = true;
    uint64_t size = std::min(rounded, next - address);
    // PyTorch leaves a large block's remainder of at most kSmallSize unsplit, except in expandable segments.
    if (large_pool && !expandable && next - address - size <= kSmallSize) size = next - address;
    const BlockState state = b.pending_free ? BlockState::kActivePendingFree : BlockState::kActiveAllocated;
    out.blocks.push_back(SnapshotBlock{address, size, b.requested, state, b.stack});
    if (state == BlockState::kActiveAllocated) out.allocated_size += size;
    out.active_size += size;
    out.requested_size += b.requested;
    cursor = address + size;
  }
  if (cursor < end) out.blocks.push_back(SnapshotBlock{cursor, end - cursor, 0, BlockState::kInactive, 0});
  s_.segments.push_back(std::move(out));
}

void SnapshotPass::Finish() {
  for (const auto& [device, d] : devices_) {
    // Segments and mapped ranges, by address (they never overlap).
    std::vector<std::pair<uint64_t, const LiveSegment*>> all;
    for (const auto& [address, seg] : d.segments) all.emplace_back(address, &seg);
    const size_t plain = all.size();
    for (const auto& [address, range] : d.mapped) all.emplace_back(address, &range);
    std::vector<size_t> order(all.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return all[a].first < all[b].first; });
    for (size_t i : order) {
      const bool expandable = i >= plain;
      const uint64_t start = all[i].first;
      const uint64_t end = expandable ? all[i].second->size : start + all[i].second->size;
      LayOut(device, d, start, *all[i].second, end, expandable);
    }
    uint64_t active = 0;
    for (const SnapshotSegment& seg : s_.segments) {
      if (seg.device != device) continue;
      for (const SnapshotBlock& b : seg.blocks) active += b.state != BlockState::kInactive;
    }
    if (d.blocks.size() > active) s_.stray_blocks += d.blocks.size() - active;
  }
  if (s_.device_traces.empty()) s_.device_traces.resize(1);
}

}  // namespace

uint64_t RoundedBlockSize(uint64_t requested) {
  if (requested < kMinBlockSize) return kMinBlockSize;
  return (requested + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

absl::StatusOr<std::unique_ptr<TorchSnapshot>> BuildTorchSnapshot(const std::string& path) {
  auto s = std::make_unique<TorchSnapshot>();
  s->info.path = path;
  SnapshotPass pass(*s);
  if (absl::Status status = ReadTrace(path, pass, &s->info.stats); !status.ok()) return status;
  if (s->torch_events == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has no events of PyTorch's caching allocator (torch.*), so there is no snapshot to write: the "
              "program did not use PyTorch's native allocator, or ran with CUMEMTRACE_TORCH_BLOCKS=0, or the "
              "tracker could not attach (the summary's notices say why)"));
  }
  pass.Finish();
  return s;
}

}  // namespace cumemtrace::analyzer
