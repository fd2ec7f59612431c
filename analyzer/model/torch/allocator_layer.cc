// AllocatorLayer (see allocator_layer.h). Must never let a bad trace drive a counter negative or leave a segment's
// blocks not covering it exactly: every path that cannot place an event counts a mismatch and keeps the layout
// whole.
#include "analyzer/model/torch/allocator_layer.h"

#include <algorithm>
#include <iterator>

namespace cumemtrace::analyzer {
namespace {

using Blocks = std::map<uint64_t, TorchBlock>;

// Free blocks are made and reset in place, field by field: building a TorchBlock on the stack and copying it in
// had the compiler store it in 8-byte pieces and load it back in 16-byte ones, which stalls the copy (store
// forwarding fails); in perf those loads were the layer's costliest instructions.
void MakeFree(TorchBlock& b, uint64_t size, uint64_t stream) {
  b = TorchBlock();
  b.size = size;
  b.stream = stream;
}

// A free block at `address`, unless a block starts there already (a damaged layout: that one is kept as it is).
Blocks::iterator PutFreeBlock(Blocks& blocks, Blocks::const_iterator hint, uint64_t address, uint64_t size,
                              uint64_t stream) {
  const size_t before = blocks.size();
  auto it = blocks.try_emplace(hint, address);
  if (blocks.size() != before) MakeFree(it->second, size, stream);
  return it;
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

std::map<uint64_t, TorchSegment>::iterator AllocatorLayer::SegmentAt(Device& d, uint64_t address) {
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

std::map<uint64_t, TorchSegment>::iterator AllocatorLayer::EraseSegment(Device& d,
                                                                        std::map<uint64_t, TorchSegment>::iterator it) {
  SegmentsChanged(d);
  return d.segments.erase(it);
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
    case format::Api::kTorchFreeRequested: FreeRequested(d, e); break;
    case format::Api::kTorchFreeCompleted: FreeCompleted(d, e); break;
    case format::Api::kTorchFree:  // requested and completed at once
      FreeRequested(d, e);
      FreeCompleted(d, e);
      break;
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
    sit = d.segments.emplace(e.address, std::move(s)).first;
    PutFreeBlock(sit->second.blocks, sit->second.blocks.end(), e.address, size, e.stream);
  }
  TorchSegment& seg = sit->second;
  if (seg.expandable) seg.small_pool = TorchIsSmall(rounded);  // the pool whose expandable segment this is
  auto it = std::prev(seg.blocks.upper_bound(e.address));
  bool estimated = seg.inferred;
  if (it->second.state != TorchBlockState::kFree) {
    // A block the layer thinks is in use: its end was missed. Close it and reuse the place.
    ++st.mismatches;
    estimated = true;
    if (it->second.state == TorchBlockState::kAllocated) Release(d, it->second);
    Complete(d, it->second);
  }
  if (it->first < e.address) {
    // Blocks start where a free block starts; this one does not: split the front off.
    ++st.mismatches;
    estimated = true;
    const uint64_t front = e.address - it->first;
    const uint64_t rest = it->second.size - front;
    it->second.size = front;
    it = PutFreeBlock(seg.blocks, std::next(it), e.address, rest, it->second.stream);
  }
  TorchBlock& b = it->second;
  uint64_t extent = b.size;
  if (rounded > b.size) {
    ++st.mismatches;
    estimated = true;
  } else if (TorchShouldSplit(b.size, rounded, seg.small_pool || seg.expandable, config_)) {
    extent = rounded;
    PutFreeBlock(seg.blocks, std::next(it), e.address + rounded, b.size - rounded, b.stream);
  }
  if (!config_.unmodelled.empty()) estimated = true;
  b.size = extent;
  b.requested = e.size;
  b.stack = e.stack;
  b.stream = e.stream;
  b.index = when.index;
  b.seq = e.seq;
  b.time_ns = e.time_ns;
  b.thread = e.thread;
  b.state = TorchBlockState::kAllocated;
  b.estimated = estimated;
  b.autograd = autograd_;
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

void AllocatorLayer::MergeFree(TorchSegment& s, Blocks::iterator it) {
  if (it != s.blocks.begin()) {
    auto prev = std::prev(it);
    if (Mergeable(prev->second) && Mergeable(it->second)) {
      prev->second.size += it->second.size;
      s.blocks.erase(it);
      it = prev;
    }
  }
  auto next = std::next(it);
  if (next != s.blocks.end() && Mergeable(next->second) && Mergeable(it->second)) {
    it->second.size += next->second.size;
    s.blocks.erase(next);
  }
}

void AllocatorLayer::FreeRequested(Device& d, const Event& e) {
  auto sit = SegmentAt(d, e.address);
  if (sit == d.segments.end()) {
    ++d.stats.predating_frees;
    return;
  }
  auto it = sit->second.blocks.find(e.address);
  if (it == sit->second.blocks.end() || it->second.state == TorchBlockState::kFree) {
    // Inside a segment the layer knows but not a block it saw allocated: allocated before the tracker in a segment
    // the layer made up, or a layout the layer lost.
    if (sit->second.inferred) {
      ++d.stats.predating_frees;
    } else {
      ++d.stats.mismatches;
    }
    return;
  }
  if (it->second.state == TorchBlockState::kAllocated) Release(d, it->second);
}

void AllocatorLayer::FreeCompleted(Device& d, const Event& e) {
  auto sit = SegmentAt(d, e.address);
  if (sit == d.segments.end()) return;  // predating: counted at its FREE_REQUESTED
  TorchSegment& seg = sit->second;
  auto it = seg.blocks.find(e.address);
  if (it == seg.blocks.end() || it->second.state == TorchBlockState::kFree) return;
  if (it->second.state == TorchBlockState::kAllocated) {
    ++d.stats.mismatches;  // FREE_REQUESTED missed
    Release(d, it->second);
  }
  Complete(d, it->second);
  MergeFree(seg, it);
  if (seg.inferred && seg.blocks.size() == 1 && Mergeable(seg.blocks.begin()->second)) EraseSegment(d, sit);
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
  PutFreeBlock(s.blocks, s.blocks.end(), e.address, e.size, e.stream);
  SegmentsChanged(d);
  d.segments.emplace(e.address, std::move(s));
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
  for (auto& [address, b] : it->second.blocks) {
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
    host = d.segments.emplace(e.address, std::move(s)).first;
  }
  SegmentsChanged(d);  // a segment is made or grows
  TorchSegment& seg = host->second;
  seg.size += e.size;
  MergeFree(seg, PutFreeBlock(seg.blocks, seg.blocks.end(), e.address, e.size, e.stream));
  auto after = d.segments.find(e.address + e.size);
  if (after != d.segments.end() && after->second.expandable && !after->second.inferred) {
    const uint64_t joint = e.address + e.size;
    seg.size += after->second.size;
    seg.blocks.merge(after->second.blocks);
    EraseSegment(d, after);
    MergeFree(seg, seg.blocks.find(joint));
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
    auto it = std::prev(seg.blocks.upper_bound(at));
    if (it->first == at) return;
    const uint64_t tail = it->first + it->second.size - at;
    if (it->second.state != TorchBlockState::kFree) ++d.stats.mismatches;
    it->second.size = at - it->first;
    PutFreeBlock(seg.blocks, std::next(it), at, tail, it->second.stream);
  };
  split_at(address);
  split_at(end);
  TorchSegment rest;
  rest.stream = seg.stream;
  rest.expandable = seg.expandable;
  rest.small_pool = seg.small_pool;
  for (auto it = seg.blocks.lower_bound(address); it != seg.blocks.end();) {
    if (it->first >= end) {
      rest.size += it->second.size;
      rest.blocks.insert(*it);
    } else if (it->second.state != TorchBlockState::kFree) {
      ++d.stats.mismatches;
      if (it->second.state == TorchBlockState::kAllocated) Release(d, it->second);
      Complete(d, it->second);
    }
    it = seg.blocks.erase(it);
  }
  seg.size = address > start ? address - start : 0;
  if (!rest.blocks.empty()) d.segments.emplace(end, std::move(rest));
  if (seg.blocks.empty()) EraseSegment(d, sit);
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
    for (const auto& [block_address, b] : s.blocks) {
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

std::pair<uint64_t, uint64_t> AllocatorLayer::TensorBytes(int32_t device) const {
  auto it = devices_.find(device);
  if (it == devices_.end()) return {0, 0};
  return {it->second->stats.allocated_bytes.current, it->second->stats.requested_bytes.current};
}

const TorchBlock* AllocatorLayer::BlockAt(int32_t device, uint64_t address) const {
  auto d = devices_.find(device);
  if (d == devices_.end()) return nullptr;
  const std::map<uint64_t, TorchSegment>& segments = d->second->segments;
  auto sit = segments.upper_bound(address);
  if (sit == segments.begin()) return nullptr;
  --sit;
  auto it = sit->second.blocks.find(address);
  return it == sit->second.blocks.end() ? nullptr : &it->second;
}

std::vector<TorchSegmentView> AllocatorLayer::Map(int32_t device) const {
  std::vector<TorchSegmentView> out;
  auto it = devices_.find(device);
  if (it == devices_.end()) return out;
  for (const auto& [address, s] : it->second->segments) {
    TorchSegmentView v;
    v.address = address;
    v.size = s.size;
    v.stream = s.stream;
    v.small_pool = s.small_pool;
    v.expandable = s.expandable;
    v.inferred = s.inferred;
    for (const auto& [block_address, b] : s.blocks) v.blocks.push_back(TorchBlockView{block_address, b});
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace cumemtrace::analyzer
