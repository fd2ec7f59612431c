// BuildTorchSnapshot (see torch_snapshot.h): one pass that feeds the torch.* events to the allocator layer and
// writes device_traces as it goes (a free takes its block's requested size and stack from the layer, before the
// layer applies it), and remembers the stack of each live driver allocation and mapping; then reads the layer's
// segments and blocks off at the end.
#include "analyzer/model/torch/torch_snapshot.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "analyzer/model/torch/allocator_layer.h"
#include "analyzer/model/torch/allocator_rules.h"
#include "analyzer/model/metadata_visitor.h"
#include "analyzer/model/trace_info.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {
namespace {

using format::Api;

class SnapshotPass : public MetadataVisitor {
 public:
  SnapshotPass(TorchSnapshot& s, uint64_t until_seq)
      : MetadataVisitor(s.info, s.stacks, s.symbols, s.python_frames), s_(s), until_seq_(until_seq) {}
  void OnAllocatorAttach(const AllocatorAttachInfo& attach) override {
    if (attached_) return;  // one tracker per process: a second attach changes nothing (as in the analysis)
    attached_ = true;
    AllocatorConfig config = ParseAllocatorConfig(attach.config);
    s_.estimates.unmodelled = config.unmodelled;
    s_.estimates.attached_late = !attach.at_first_segment;
    layer_.SetConfig(std::move(config));
  }
  void OnEvent(const Event& e) override;

  // Reads the segments off the layer.
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
    const int64_t unix_ns = h.start_unix_time_ns != 0
        ? SaturatingAdd(h.start_unix_time_ns, SaturatingSub(time_ns, h.start_time_ns))
        : time_ns;
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
  void TorchEvent(const Event& e, uint64_t index);
  // The entries of a free, from the block the layer holds at its address (before the layer applies the free).
  void Free(const Event& e, bool requested, bool completed);
  SnapshotSegment Segment(int32_t device, const TorchSegmentView& v);

  TorchSnapshot& s_;
  const uint64_t until_seq_;
  AllocatorLayer layer_;
  bool attached_ = false;
  uint64_t index_ = 0;  // replay position of the next event
  // The stack of each live driver allocation and mapping, so that a segment gets the stack that made it.
  absl::flat_hash_map<SpaceAddress, uint64_t> driver_stacks_;
};

void SnapshotPass::OnEvent(const Event& e) {
  const uint64_t index = index_++;
  if (e.seq > until_seq_) return;
  s_.info.NoteEventTime(e.time_ns);
  if (e.info->space == format::Space::kTorchBlock || e.info->space == format::Space::kTorchSegment) {
    // PyTorch's device index is an int8 (c10::DeviceIndex), and device_traces is a list by index: an event of
    // another device comes from a damaged trace and would make that list absurdly long.
    if (e.device < 0 || e.device > kMaxTorchDevice) {
      ++s_.foreign_device_events;
      return;
    }
    TorchEvent(e, index);
    return;
  }
  if (e.result != 0) return;
  if (e.info->op == format::Op::kAlloc) {
    driver_stacks_[SpaceAddress{e.info->space, e.address}] = e.stack;
  } else if (e.info->op == format::Op::kFree) {
    driver_stacks_.erase(SpaceAddress{e.info->space, e.address});
  }
}

void SnapshotPass::Free(const Event& e, bool requested, bool completed) {
  const TorchBlock* b = layer_.BlockAt(e.device, e.address);
  if (b == nullptr || b->state == TorchBlockState::kFree) {
    // No size, no stack, and memory_viz's segment view fails on a free whose block it cannot find: left out.
    ++s_.unmatched_frees;
    return;
  }
  SnapshotTraceEntry entry;
  entry.addr = e.address;
  entry.time_us = TimeUs(e.time_ns);
  entry.size = b->requested;
  entry.stream = b->stream;
  entry.stack = b->stack;
  std::vector<SnapshotTraceEntry>& trace = Trace(e.device);
  if (requested) {
    entry.action = TraceAction::kFreeRequested;
    trace.push_back(entry);
  }
  if (completed) {
    entry.action = TraceAction::kFreeCompleted;
    trace.push_back(entry);
  }
}

void SnapshotPass::TorchEvent(const Event& e, uint64_t index) {
  ++s_.torch_events;
  SnapshotTraceEntry entry;
  entry.addr = e.address;
  entry.size = e.size;
  entry.stream = e.stream;
  entry.time_us = TimeUs(e.time_ns);
  entry.stack = e.stack;
  bool write = true;
  switch (e.api) {
    case Api::kTorchAlloc:
    case Api::kTorchAllocGrad:
    case Api::kTorchAllocNoGrad: entry.action = TraceAction::kAlloc; break;
    case Api::kTorchFreeRequested: Free(e, true, false); write = false; break;
    case Api::kTorchFreeCompleted: Free(e, false, true); write = false; break;
    case Api::kTorchFree: Free(e, true, true); write = false; break;
    case Api::kTorchSegmentAlloc:
      entry.action = TraceAction::kSegmentAlloc;
      entry.stack = DriverStack(format::Space::kAllocation, e.address);
      break;
    case Api::kTorchSegmentFree:  // written before the driver's free: its allocation is still live
      entry.action = TraceAction::kSegmentFree;
      entry.stack = DriverStack(format::Space::kAllocation, e.address);
      break;
    case Api::kTorchSegmentMap:
      entry.action = TraceAction::kSegmentMap;
      entry.stack = DriverStack(format::Space::kVmmMapping, e.address);
      break;
    case Api::kTorchSegmentUnmap: entry.action = TraceAction::kSegmentUnmap; break;
    case Api::kTorchOom:
      entry.action = TraceAction::kOom;
      entry.addr = e.aux;
      break;
    default: write = false; break;
  }
  layer_.Apply(e, index);
  if (write) Trace(e.device).push_back(entry);
}

SnapshotSegment SnapshotPass::Segment(int32_t device, const TorchSegmentView& v) {
  SnapshotSegment out;
  out.device = device;
  out.address = v.address;
  out.total_size = v.size;
  out.stream = v.stream;
  out.large = !v.small_pool;
  out.is_expandable = v.expandable;
  out.stack = DriverStack(v.expandable ? format::Space::kVmmMapping : format::Space::kAllocation, v.address);
  out.blocks.reserve(v.blocks.size());
  for (const TorchBlockView& view : v.blocks) {
    const TorchBlock& b = view.block;
    SnapshotBlock block;
    block.address = view.address;
    block.size = b.size;
    if (b.state != TorchBlockState::kFree) {
      block.state = b.state == TorchBlockState::kAllocated ? BlockState::kActiveAllocated
                                                             : BlockState::kActivePendingFree;
      block.requested_size = b.requested;
      block.stack = b.stack;
      if (block.state == BlockState::kActiveAllocated) out.allocated_size += b.size;
      out.active_size += b.size;
      out.requested_size += b.requested;
      if (b.estimated) ++s_.estimates.estimated_blocks;
    }
    out.blocks.push_back(block);
  }
  return out;
}

void SnapshotPass::Finish() {
  for (const TorchDeviceStats* stats : layer_.Devices()) {
    s_.estimates.mismatches += stats->mismatches;
    for (const TorchSegmentView& v : layer_.Map(stats->device)) {
      if (v.inferred) {
        // Made up around blocks whose segment the tracker never saw: its extent is unknown, so it is left out.
        for (const TorchBlockView& b : v.blocks) s_.stray_blocks += b.block.state != TorchBlockState::kFree;
        continue;
      }
      s_.segments.push_back(Segment(stats->device, v));
    }
  }
  if (s_.device_traces.empty()) s_.device_traces.resize(1);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TorchSnapshot>> BuildTorchSnapshot(const std::string& path, uint64_t until_seq) {
  auto s = std::make_unique<TorchSnapshot>();
  s->info.path = path;
  SnapshotPass pass(*s, until_seq);
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
