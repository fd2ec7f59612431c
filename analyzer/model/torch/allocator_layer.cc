// AllocatorLayer (see allocator_layer.h). Must never let a bad trace drive a counter negative or leave a segment's
// blocks not covering it exactly: every path that cannot place an event counts a mismatch and keeps the layout
// whole.
#include "analyzer/model/torch/allocator_layer.h"

#include <algorithm>

namespace cumemtrace::analyzer {
namespace {

// Free blocks are made and reset in place, field by field: building a TorchBlock on the stack and copying it in
// had the compiler store it in 8-byte pieces and load it back in 16-byte ones, which stalls the copy (store
// forwarding fails); in perf those loads were the layer's costliest instructions.
void MakeFree(TorchBlock& b, uint64_t size, uint64_t stream) {
  b = TorchBlock();
  b.size = size;
  b.stream = stream;
}

bool Mergeable(const TorchBlock& b) { return b.state == TorchBlockState::kFree; }

// No allocator hands out more than this; larger sizes are damage (and would overflow the rounding).
constexpr uint64_t kMaxSize = uint64_t{1} << 56;

}  // namespace

const char* TorchBlockStateName(TorchBlockState state) {
  switch (state) {
    case TorchBlockState::kAllocated: return "allocated";
    case TorchBlockState::kPendingFree: return "pending_free";
    case TorchBlockState::kFree: return "free";
  }
  return "free";
}

AllocatorLayer::Device& AllocatorLayer::ForDevice(int32_t device) {
  if (cached_ != nullptr && cached_->stats.device == device) return *cached_;
  std::unique_ptr<Device>& d = devices_[device];
  if (d == nullptr) {
    d = std::make_unique<Device>();
    d->stats.device = device;
  }
  cached_ = d.get();
  return *d;
}

AllocatorLayer::SegmentIt AllocatorLayer::SegmentAt(Device& d, uint64_t address) {
  SegmentCacheEntry& cached = d.segment_cache[(address >> 21) % kSegmentCacheSize];
  if (cached.version == d.segments_version && address >= cached.start && address < cached.end &&
      address < cached.next_start) {
    return cached.segment;
  }
  auto it = d.segments.upper_bound(address);
  const uint64_t next_start = it == d.segments.end() ? ~uint64_t{0} : it->first;
  if (it == d.segments.begin()) return d.segments.end();
  --it;
  if (address - it->first >= it->second.size) return d.segments.end();
  cached = SegmentCacheEntry{it, it->first, it->first + it->second.size, next_start, d.segments_version};
  return it;
}

AllocatorLayer::SegmentIt AllocatorLayer::EraseSegment(Device& d, SegmentIt it) {
  SegmentsChanged(d);
  for (uint32_t i = it->second.first; i != kNoBlock; i = d.nodes[i].next) {
    d.index.Erase(d.nodes[i].address, i);
    d.free_nodes.push_back(i);
  }
  return d.segments.erase(it);
}

uint32_t AllocatorLayer::BlockStartingAt(const Device& d, SegmentIt s, uint64_t address) {
  const uint64_t segment = s->first;
  return d.index.Find(address, [&](uint32_t i) { return d.nodes[i].segment == segment; });
}

uint32_t AllocatorLayer::BlockHolding(const Device& d, SegmentIt s, uint64_t address) {
  uint32_t holding = s->second.first;
  for (uint32_t i = holding; i != kNoBlock && d.nodes[i].address <= address; i = d.nodes[i].next) holding = i;
  return holding;
}

uint32_t AllocatorLayer::PutFreeBlock(Device& d, SegmentIt s, uint32_t after, uint64_t address, uint64_t size,
                                      uint64_t stream) {
  if (const uint32_t there = BlockStartingAt(d, s, address); there != kNoBlock) return there;
  uint32_t i;
  if (d.free_nodes.empty()) {
    i = static_cast<uint32_t>(d.nodes.size());
    d.nodes.emplace_back();
  } else {
    i = d.free_nodes.back();
    d.free_nodes.pop_back();
  }
  d.index.Insert(address, i);
  TorchSegment& seg = s->second;
  BlockNode& n = d.nodes[i];
  n.address = address;
  n.segment = s->first;
  MakeFree(n.block, size, stream);
  n.prev = after;
  n.next = after == kNoBlock ? seg.first : d.nodes[after].next;
  (n.prev == kNoBlock ? seg.first : d.nodes[n.prev].next) = i;
  (n.next == kNoBlock ? seg.last : d.nodes[n.next].prev) = i;
  ++seg.blocks;
  return i;
}

void AllocatorLayer::DropBlock(Device& d, TorchSegment& s, uint32_t i) {
  BlockNode& n = d.nodes[i];
  (n.prev == kNoBlock ? s.first : d.nodes[n.prev].next) = n.next;
  (n.next == kNoBlock ? s.last : d.nodes[n.next].prev) = n.prev;
  --s.blocks;
  d.index.Erase(n.address, i);
  d.free_nodes.push_back(i);
}

void AllocatorLayer::MoveBlocks(Device& d, TorchSegment& from, uint32_t i, SegmentIt to) {
  TorchSegment& t = to->second;
  while (i != kNoBlock) {
    BlockNode& n = d.nodes[i];
    const uint32_t next = n.next;
    (n.prev == kNoBlock ? from.first : d.nodes[n.prev].next) = n.next;
    (n.next == kNoBlock ? from.last : d.nodes[n.next].prev) = n.prev;
    --from.blocks;
    d.index.Erase(n.address, i);
    n.segment = to->first;
    if (BlockStartingAt(d, to, n.address) == kNoBlock) {
      d.index.Insert(n.address, i);
      n.prev = t.last;
      n.next = kNoBlock;
      (t.last == kNoBlock ? t.first : d.nodes[t.last].next) = i;
      t.last = i;
      ++t.blocks;
    } else {
      d.free_nodes.push_back(i);  // a block of `to` starts there already (a damaged layout): that one is kept
    }
    i = next;
  }
}

void AllocatorLayer::Apply(const Event& e, uint64_t index) {
  if (e.info == nullptr || !format::IsTorchApi(e.api)) return;
  Device& d = ForDevice(e.device);
  const EventStamp when{index, e.time_ns, e.seq};
  const bool segment_event = e.api == format::Api::kTorchSegmentAlloc || e.api == format::Api::kTorchSegmentFree ||
                             e.api == format::Api::kTorchSegmentMap || e.api == format::Api::kTorchSegmentUnmap;
  // A range that is empty or wraps around the address space cannot be placed (a damaged trace).
  const bool wraps = e.address + e.size < e.address;
  if ((segment_event && (e.size == 0 || wraps)) ||
      (format::IsTorchBlockAlloc(e.api) && (e.size > kMaxSize || e.address > ~uint64_t{0} - 4 * kMaxSize))) {
    ++d.stats.mismatches;
    return;
  }
  switch (e.api) {
    case format::Api::kTorchAlloc:
    case format::Api::kTorchAllocGrad:
    case format::Api::kTorchAllocNoGrad: Alloc(d, e, when); break;
    case format::Api::kTorchFreeRequested: FreeRequested(d, Locate(d, e.address)); break;
    case format::Api::kTorchFreeCompleted: FreeCompleted(d, Locate(d, e.address)); break;
    case format::Api::kTorchFree: {  // requested and completed at once
      const BlockPlace place = Locate(d, e.address);
      FreeRequested(d, place);
      FreeCompleted(d, place);
      break;
    }
    case format::Api::kTorchSegmentAlloc: SegmentAlloc(d, e, when); break;
    case format::Api::kTorchSegmentFree: SegmentFree(d, e); break;
    case format::Api::kTorchSegmentMap: SegmentMap(d, e, when); break;
    case format::Api::kTorchSegmentUnmap: SegmentUnmap(d, e); break;
    case format::Api::kTorchOom:
      ++d.stats.ooms;
      d.reserved_peak_settling = false;
      break;
    default: break;
  }
}

void AllocatorLayer::Alloc(Device& d, const Event& e, const EventStamp& when) {
  TorchDeviceStats& st = d.stats;
  ++st.alloc_events;
  const uint64_t rounded = TorchRoundSize(e.size, config_);
  auto sit = SegmentAt(d, e.address);
  if (sit == d.segments.end()) {
    // Outside every segment the layer knows (its segment predates the tracker): a segment of its own, its extent
    // the rounded size (clipped at the next segment), not counted as reserved.
    uint64_t size = rounded;
    if (auto next = d.segments.upper_bound(e.address); next != d.segments.end()) {
      size = std::min(size, next->first - e.address);
    }
    TorchSegment s;
    s.size = size;
    s.stream = e.stream;
    s.small_pool = TorchIsSmall(rounded);
    s.inferred = true;
    SegmentsChanged(d);
    sit = d.segments.emplace(e.address, s).first;
    PutFreeBlock(d, sit, sit->second.last, e.address, size, e.stream);
  }
  TorchSegment& seg = sit->second;
  if (seg.expandable) seg.small_pool = TorchIsSmall(rounded);  // the pool whose expandable segment this is
  uint32_t i = BlockStartingAt(d, sit, e.address);
  if (i == kNoBlock) i = BlockHolding(d, sit, e.address);
  if (i == kNoBlock) {  // a segment without blocks: never made, but damage must not be able to crash the replay
    ++st.mismatches;
    return;
  }
  bool estimated = seg.inferred;
  TorchBlock* b = &d.nodes[i].block;
  if (b->state != TorchBlockState::kFree) {
    // A block the layer thinks is in use: its end was missed. Close it and reuse the place.
    ++st.mismatches;
    estimated = true;
    if (b->state == TorchBlockState::kAllocated) Release(d, *b);
    Complete(d, *b);
  }
  if (const uint64_t start = d.nodes[i].address; start < e.address) {
    // Blocks start where a free block starts; this one does not: split the front off.
    ++st.mismatches;
    estimated = true;
    const uint64_t front = e.address - start;
    const uint64_t rest = b->size - front;
    b->size = front;
    i = PutFreeBlock(d, sit, i, e.address, rest, b->stream);
    b = &d.nodes[i].block;
  }
  uint64_t extent = b->size;
  if (rounded > b->size) {
    ++st.mismatches;
    estimated = true;
  } else if (TorchShouldSplit(b->size, rounded, seg.small_pool || seg.expandable, config_)) {
    extent = rounded;
    PutFreeBlock(d, sit, i, e.address + rounded, b->size - rounded, b->stream);  // nodes never move: `b` stays valid
  }
  if (!config_.unmodelled.empty()) estimated = true;
  b->size = extent;
  b->requested = e.size;
  b->stack = e.stack;
  b->stream = e.stream;
  b->index = when.index;
  b->seq = e.seq;
  b->time_ns = e.time_ns;
  b->thread = e.thread;
  b->state = TorchBlockState::kAllocated;
  b->estimated = estimated;
  b->autograd = autograd_;
  if (estimated) ++st.estimated_blocks;
  st.allocated_total_bytes += extent;

  const uint64_t old_peak = st.allocated_bytes.peak;
  st.allocated_bytes.Add(extent, when);
  if (st.allocated_bytes.peak != old_peak) st.freed_since_allocated_peak.clear();
  st.allocations.Add(1, when);
  st.requested_bytes.Add(e.size, when);
  st.active_bytes.Add(extent, when);
  if (d.reserved_peak_settling) {
    // The allocation that grew the cache to its peak: the peak's moment is when it returned, with this tensor.
    d.reserved_peak_settling = false;
    st.reserved_bytes.peak_at = when;
    st.allocated_at_reserved_peak = st.allocated_bytes.current;
    st.allocations_at_reserved_peak = st.allocations.current;
  }
}

void AllocatorLayer::Release(Device& d, TorchBlock& b) {
  TorchDeviceStats& st = d.stats;
  st.allocations.Sub(1);
  st.allocated_bytes.Sub(b.size);
  const TorchTensor t{b.stack, b.size, b.requested, b.autograd};
  if (st.allocated_bytes.peak != 0 && b.index <= st.allocated_bytes.peak_at.index) {
    st.freed_since_allocated_peak.push_back(t);
  }
  if (st.reserved_bytes.peak != 0 && b.index <= st.reserved_bytes.peak_at.index && !d.reserved_peak_settling) {
    st.freed_since_reserved_peak.push_back(t);
  }
  b.state = TorchBlockState::kPendingFree;
}

void AllocatorLayer::Complete(Device& d, TorchBlock& b) {
  d.stats.requested_bytes.Sub(b.requested);
  d.stats.active_bytes.Sub(b.size);
  MakeFree(b, b.size, b.stream);
}

void AllocatorLayer::MergeFree(Device& d, TorchSegment& s, uint32_t i) {
  if (const uint32_t prev = d.nodes[i].prev;
      prev != kNoBlock && Mergeable(d.nodes[prev].block) && Mergeable(d.nodes[i].block)) {
    d.nodes[prev].block.size += d.nodes[i].block.size;
    DropBlock(d, s, i);
    i = prev;
  }
  if (const uint32_t next = d.nodes[i].next;
      next != kNoBlock && Mergeable(d.nodes[next].block) && Mergeable(d.nodes[i].block)) {
    d.nodes[i].block.size += d.nodes[next].block.size;
    DropBlock(d, s, next);
  }
}

AllocatorLayer::BlockPlace AllocatorLayer::Locate(Device& d, uint64_t address) {
  const SegmentIt sit = SegmentAt(d, address);
  return BlockPlace{sit, sit == d.segments.end() ? kNoBlock : BlockStartingAt(d, sit, address)};
}

void AllocatorLayer::FreeRequested(Device& d, const BlockPlace& place) {
  if (place.segment == d.segments.end()) {
    ++d.stats.predating_frees;
    return;
  }
  if (place.block == kNoBlock || d.nodes[place.block].block.state == TorchBlockState::kFree) {
    // Inside a segment the layer knows but not a block it saw allocated: allocated before the tracker in a segment
    // the layer made up, or a layout the layer lost.
    if (place.segment->second.inferred) {
      ++d.stats.predating_frees;
    } else {
      ++d.stats.mismatches;
    }
    return;
  }
  if (d.nodes[place.block].block.state == TorchBlockState::kAllocated) Release(d, d.nodes[place.block].block);
}

void AllocatorLayer::FreeCompleted(Device& d, const BlockPlace& place) {
  // Outside every segment: predating, counted at its FREE_REQUESTED.
  if (place.segment == d.segments.end() || place.block == kNoBlock) return;
  TorchSegment& seg = place.segment->second;
  TorchBlock& b = d.nodes[place.block].block;
  if (b.state == TorchBlockState::kFree) return;
  if (b.state == TorchBlockState::kAllocated) {
    ++d.stats.mismatches;  // FREE_REQUESTED missed
    Release(d, b);
  }
  Complete(d, b);
  MergeFree(d, seg, place.block);
  if (seg.inferred && seg.blocks == 1 && Mergeable(d.nodes[seg.first].block)) EraseSegment(d, place.segment);
}

void AllocatorLayer::SegmentAlloc(Device& d, const Event& e, const EventStamp& when) {
  TorchDeviceStats& st = d.stats;
  // Segments the layer made up (or lost) where this one lies are gone: the driver gave the range out again.
  for (auto it = d.segments.lower_bound(e.address); it != d.segments.end() && it->first < e.address + e.size;) {
    if (!it->second.inferred) ++st.mismatches;
    it = EraseSegment(d, it);
  }
  if (auto before = SegmentAt(d, e.address); before != d.segments.end()) {
    if (!before->second.inferred) ++st.mismatches;
    EraseSegment(d, before);
  }
  TorchSegment s;
  s.size = e.size;
  s.stream = e.stream;
  s.small_pool = e.size == kTorchSmallBuffer;
  SegmentsChanged(d);
  auto sit = d.segments.emplace(e.address, s).first;
  PutFreeBlock(d, sit, kNoBlock, e.address, e.size, e.stream);
  st.segments.Add(1, when);
  AddReserved(d, e.size, when);
}

void AllocatorLayer::AddReserved(Device& d, uint64_t bytes, const EventStamp& when) {
  TorchDeviceStats& st = d.stats;
  const uint64_t old_peak = st.reserved_bytes.peak;
  st.reserved_bytes.Add(bytes, when);
  if (st.reserved_bytes.peak != old_peak) {
    st.freed_since_reserved_peak.clear();
    st.allocated_at_reserved_peak = st.allocated_bytes.current;
    st.allocations_at_reserved_peak = st.allocations.current;
    d.reserved_peak_settling = true;
  }
}

void AllocatorLayer::SegmentFree(Device& d, const Event& e) {
  auto it = d.segments.find(e.address);
  if (it == d.segments.end() || it->second.inferred) {
    ++d.stats.predating_segment_frees;
    if (it != d.segments.end()) EraseSegment(d, it);
    return;
  }
  for (uint32_t i = it->second.first; i != kNoBlock; i = d.nodes[i].next) {
    TorchBlock& b = d.nodes[i].block;
    if (b.state == TorchBlockState::kFree) continue;
    ++d.stats.mismatches;
    if (b.state == TorchBlockState::kAllocated) Release(d, b);
    Complete(d, b);
  }
  d.stats.reserved_bytes.Sub(it->second.size);
  d.stats.segments.Sub(1);
  EraseSegment(d, it);
}

void AllocatorLayer::SegmentMap(Device& d, const Event& e, const EventStamp& when) {
  TorchDeviceStats& st = d.stats;
  AddReserved(d, e.size, when);
  if (SegmentAt(d, e.address) != d.segments.end()) {
    ++st.mismatches;  // mapped twice: keep the layout, count the bytes
    return;
  }
  // Mapped memory next to mapped memory of an expandable segment joins it (its free blocks merge across).
  auto host = d.segments.end();
  if (e.address != 0) {
    auto before = SegmentAt(d, e.address - 1);
    if (before != d.segments.end() && before->second.expandable && before->first + before->second.size == e.address) {
      host = before;
    }
  }
  if (host == d.segments.end()) {
    TorchSegment s;
    s.stream = e.stream;
    s.expandable = true;
    s.small_pool = false;
    host = d.segments.emplace(e.address, s).first;
  }
  SegmentsChanged(d);  // a segment is made or grows
  TorchSegment& seg = host->second;
  seg.size += e.size;
  MergeFree(d, seg, PutFreeBlock(d, host, seg.last, e.address, e.size, e.stream));
  auto after = d.segments.find(e.address + e.size);
  if (after != d.segments.end() && after->second.expandable && !after->second.inferred) {
    const uint64_t joint = e.address + e.size;
    seg.size += after->second.size;
    MoveBlocks(d, after->second, after->second.first, host);
    EraseSegment(d, after);
    if (const uint32_t i = BlockStartingAt(d, host, joint); i != kNoBlock) MergeFree(d, seg, i);
  }
}

void AllocatorLayer::RemoveRange(Device& d, uint64_t address, uint64_t size) {
  auto sit = SegmentAt(d, address);
  if (sit == d.segments.end()) {
    ++d.stats.mismatches;
    return;
  }
  SegmentsChanged(d);  // the segment shrinks, and what lies after the range becomes a segment of its own
  const uint64_t start = sit->first;
  TorchSegment& seg = sit->second;
  const uint64_t end = std::min(address + size, start + seg.size);
  // Split the blocks at both edges, then move what lies after the range to a segment of its own.
  auto split_at = [&](uint64_t at) {
    if (at <= start || at >= start + seg.size) return;
    const uint32_t i = BlockHolding(d, sit, at);
    if (i == kNoBlock) return;
    TorchBlock& b = d.nodes[i].block;
    const uint64_t block_start = d.nodes[i].address;
    if (block_start == at) return;
    const uint64_t tail = block_start + b.size - at;
    if (b.state != TorchBlockState::kFree) ++d.stats.mismatches;
    b.size = at - block_start;
    PutFreeBlock(d, sit, i, at, tail, b.stream);
  };
  split_at(address);
  split_at(end);
  uint32_t i = seg.first;
  while (i != kNoBlock && d.nodes[i].address < address) i = d.nodes[i].next;
  while (i != kNoBlock && d.nodes[i].address < end) {
    const uint32_t next = d.nodes[i].next;
    TorchBlock& b = d.nodes[i].block;
    if (b.state != TorchBlockState::kFree) {
      ++d.stats.mismatches;
      if (b.state == TorchBlockState::kAllocated) Release(d, b);
      Complete(d, b);
    }
    DropBlock(d, seg, i);
    i = next;
  }
  seg.size = address > start ? address - start : 0;
  if (i != kNoBlock) {
    TorchSegment rest;
    rest.stream = seg.stream;
    rest.expandable = seg.expandable;
    rest.small_pool = seg.small_pool;
    for (uint32_t j = i; j != kNoBlock; j = d.nodes[j].next) rest.size += d.nodes[j].block.size;
    auto [rit, made] = d.segments.emplace(end, rest);
    if (made) {
      MoveBlocks(d, seg, i, rit);
    } else {
      while (i != kNoBlock) {  // a segment starts there already (a damaged layout): what lay after is lost
        const uint32_t next = d.nodes[i].next;
        DropBlock(d, seg, i);
        i = next;
      }
    }
  }
  if (seg.blocks == 0) EraseSegment(d, sit);
}

void AllocatorLayer::SegmentUnmap(Device& d, const Event& e) {
  d.stats.reserved_bytes.Sub(e.size);
  RemoveRange(d, e.address, e.size);
}

std::vector<const TorchDeviceStats*> AllocatorLayer::Devices() const {
  std::vector<const TorchDeviceStats*> out;
  for (const auto& [device, d] : devices_) out.push_back(&d->stats);
  return out;
}

const TorchDeviceStats* AllocatorLayer::Find(int32_t device) const {
  if (cached_ != nullptr && cached_->stats.device == device) return &cached_->stats;  // after nearly every event
  auto it = devices_.find(device);
  return it == devices_.end() ? nullptr : &it->second->stats;
}

TorchFigures AllocatorLayer::Figures(int32_t device) const {
  TorchFigures f;
  auto it = devices_.find(device);
  if (it == devices_.end()) return f;
  const Device& d = *it->second;
  f.allocated_bytes = d.stats.allocated_bytes.current;
  f.allocations = d.stats.allocations.current;
  f.requested_bytes = d.stats.requested_bytes.current;
  f.active_bytes = d.stats.active_bytes.current;
  f.reserved_bytes = d.stats.reserved_bytes.current;
  f.segments = d.stats.segments.current;
  for (const auto& [address, s] : d.segments) {
    if (s.inferred) continue;
    for (uint32_t i = s.first; i != kNoBlock; i = d.nodes[i].next) {
      const TorchBlock& b = d.nodes[i].block;
      if (b.state == TorchBlockState::kFree) {
        f.cached_free_bytes += b.size;
        f.largest_free_block = std::max(f.largest_free_block, b.size);
      } else if (b.state == TorchBlockState::kPendingFree) {
        f.pending_free_bytes += b.size;
      }
    }
  }
  return f;
}

TorchBytes AllocatorLayer::Bytes(int32_t device) const {
  auto it = devices_.find(device);
  if (it == devices_.end()) return {};
  const TorchDeviceStats& s = it->second->stats;
  return {s.reserved_bytes.current, s.allocated_bytes.current, s.requested_bytes.current};
}

const TorchBlock* AllocatorLayer::BlockAt(int32_t device, uint64_t address) const {
  auto d = devices_.find(device);
  if (d == devices_.end()) return nullptr;
  const std::map<uint64_t, TorchSegment>& segments = d->second->segments;
  auto sit = segments.upper_bound(address);
  if (sit == segments.begin()) return nullptr;
  --sit;
  const Device& dev = *d->second;
  const uint64_t segment = sit->first;
  const uint32_t i = dev.index.Find(address, [&](uint32_t n) { return dev.nodes[n].segment == segment; });
  return i == kNoBlock ? nullptr : &dev.nodes[i].block;
}

std::vector<TorchSegmentView> AllocatorLayer::Map(int32_t device) const {
  std::vector<TorchSegmentView> out;
  auto it = devices_.find(device);
  if (it == devices_.end()) return out;
  const Device& d = *it->second;
  for (const auto& [address, s] : d.segments) {
    TorchSegmentView v;
    v.address = address;
    v.size = s.size;
    v.stream = s.stream;
    v.small_pool = s.small_pool;
    v.expandable = s.expandable;
    v.inferred = s.inferred;
    v.blocks.reserve(s.blocks);
    for (uint32_t i = s.first; i != kNoBlock; i = d.nodes[i].next) {
      v.blocks.push_back(TorchBlockView{d.nodes[i].address, d.nodes[i].block});
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace cumemtrace::analyzer
