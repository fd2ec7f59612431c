// The second layer of the model for PyTorch's caching allocator: per device, the segments it holds (TORCH_SEGMENT_*
// events; expandable segments as the ranges SEGMENT_MAP/UNMAP make visible) and the blocks inside them over time:
// allocated (TORCH_ALLOC .. TORCH_FREE_REQUESTED), freed but waiting for its streams (.. TORCH_FREE_COMPLETED) and
// cached free (the rest). The driver layer sees segments; people ask about tensors: this layer answers with
// PyTorch's own figures (memory_stats' allocation, allocated_bytes, active_bytes, requested_bytes, reserved_bytes
// and segment, ".all" of each), their peaks with the tensors live at them, the figures at an OOM, and the segment/
// block map at the current moment of the replay (allocator_map.h replays to any moment).
//
// A tracker event carries the bytes asked for, not the block's extent; the extent is reconstructed from the
// segment layout and the allocator's rules (allocator_rules.h): a block starts where a free block started, is the
// rounded size when the allocator splits the rest off, and keeps the whole free block when it does not. Free blocks
// merge with free neighbours when a block's free completes (never across a segment's edge, never with a block whose
// free is pending). When the layout disagrees with an event (a block missing, an ALLOC inside a block instead of at
// its start, an ALLOC outside every segment) the layer counts it in `mismatches` and extents become estimates.
//
// Blocks freed that the layer never saw allocated predate the tracker (it was attached after they were allocated):
// they are counted as such, never as anomalies. Memory grows with live segments and blocks, and with the tensors
// live at each peak; never with events.
#ifndef CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_LAYER_H_
#define CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_LAYER_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "analyzer/model/chunked_vector.h"
#include "analyzer/model/torch/allocator_rules.h"
#include "analyzer/model/torch/block_index.h"
#include "analyzer/model/torch/autograd_passes.h"
#include "analyzer/model/memory/timelines.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

enum class TorchBlockState : uint8_t {
  kAllocated,    // a live tensor (ALLOC .. FREE_REQUESTED)
  kPendingFree,  // freed by its owner, waiting for the streams that used it (.. FREE_COMPLETED)
  kFree,         // cached: part of a segment the allocator may hand out again
};
const char* TorchBlockStateName(TorchBlockState state);

struct TorchBlock {
  uint64_t size = 0;       // extent (reconstructed)
  uint64_t requested = 0;  // bytes asked for (0 for free blocks)
  uint64_t stack = 0;
  uint64_t stream = 0;
  uint64_t index = 0;  // replay position of the ALLOC
  uint64_t seq = 0;
  int64_t time_ns = 0;
  uint32_t thread = 0;
  TorchBlockState state = TorchBlockState::kFree;
  bool estimated = false;  // extent not reconstructed from a consistent layout
  AutogradStamp autograd;
};

// Where a segment's blocks are kept: see AllocatorLayer::BlockNode.
constexpr uint32_t kNoBlock = ~uint32_t{0};
static_assert(kNoBlock == BlockIndex::kNone);

struct TorchSegment {
  uint64_t size = 0;
  uint64_t stream = 0;
  // Of the small pool: a 2 MiB segment, or a mapped range whose blocks were asked for by small requests (PyTorch
  // keeps one expandable segment per pool, so a range holds blocks of one pool only).
  bool small_pool = false;
  bool expandable = false;   // mapped range of an expandable segment
  bool inferred = false;     // no SEGMENT event: made up around an ALLOC outside every known segment
  // Its blocks, by address (a list through BlockNode::next); together they cover the segment exactly.
  uint32_t first = kNoBlock;
  uint32_t last = kNoBlock;
  uint32_t blocks = 0;
};

// One counter as memory_stats() keeps it: current value and peak, with the moment of the peak.
struct TorchCounter {
  uint64_t current = 0;
  uint64_t peak = 0;
  EventStamp peak_at;  // valid when peak > 0
  void Add(uint64_t n, const EventStamp& when) {
    current += n;
    if (current > peak) {
      peak = current;
      peak_at = when;
    }
  }
  void Sub(uint64_t n) { current -= n < current ? n : current; }
};

// A live tensor as a peak snapshot needs it.
struct TorchTensor {
  uint64_t stack = 0;
  uint64_t size = 0;       // extent
  uint64_t requested = 0;
  AutogradStamp autograd;
};

// The figures at one moment of one device, as PyTorch's OOM message and memory_stats() give them.
struct TorchFigures {
  uint64_t allocated_bytes = 0;  // extents of live tensors
  uint64_t allocations = 0;
  uint64_t requested_bytes = 0;  // bytes asked for by live and pending blocks
  uint64_t active_bytes = 0;     // extents of live and pending blocks
  uint64_t reserved_bytes = 0;   // segments (mapped bytes for expandable segments)
  uint64_t segments = 0;
  uint64_t cached_free_bytes = 0;    // free blocks (reserved - active)
  uint64_t largest_free_block = 0;   // the largest free block cached
  uint64_t pending_free_bytes = 0;   // extents of blocks whose free waits for streams
};

// The three figures the phases follow after every PyTorch event (memory_stats()'s reserved_bytes, allocated_bytes
// and requested_bytes, current).
struct TorchBytes {
  uint64_t reserved = 0;
  uint64_t allocated = 0;
  uint64_t requested = 0;
};

struct TorchDeviceStats {
  int32_t device = 0;
  TorchCounter allocated_bytes, allocations, requested_bytes, active_bytes, reserved_bytes, segments;
  uint64_t alloc_events = 0;
  uint64_t allocated_total_bytes = 0;  // extents handed out, summed
  uint64_t predating_frees = 0;        // frees of blocks allocated before the tracker was attached
  uint64_t predating_segment_frees = 0;
  uint64_t mismatches = 0;             // events the layout could not place exactly (extents are estimates)
  uint64_t estimated_blocks = 0;       // blocks whose extent is an estimate
  uint64_t ooms = 0;
  // At the reserved peak: the allocated bytes and count then (reserved - allocated = cache not in use).
  uint64_t allocated_at_reserved_peak = 0;
  uint64_t allocations_at_reserved_peak = 0;
  // Tensors live at each peak that were freed since it (see Timelines::freed_since_peak).
  std::vector<TorchTensor> freed_since_allocated_peak;
  std::vector<TorchTensor> freed_since_reserved_peak;
};

// A device's segment/block map, for reports and the HTML view.
struct TorchBlockView {
  uint64_t address = 0;
  TorchBlock block;
};
struct TorchSegmentView {
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  bool small_pool = false;
  bool expandable = false;
  bool inferred = false;
  std::vector<TorchBlockView> blocks;  // by address
};

class AllocatorLayer {
 public:
  explicit AllocatorLayer(AllocatorConfig config = {}) : config_(std::move(config)) {}

  void SetConfig(AllocatorConfig config) { config_ = std::move(config); }
  const AllocatorConfig& config() const { return config_; }

  // Applies a TORCH_* event (others are ignored); `index` is its replay position. A block allocation gets the stamp
  // last given to SetAutograd.
  void Apply(const Event& event, uint64_t index);
  void SetAutograd(const AutogradStamp& stamp) { autograd_ = stamp; }

  // Devices with any TORCH_* event, by ordinal.
  std::vector<const TorchDeviceStats*> Devices() const;
  const TorchDeviceStats* Find(int32_t device) const;
  TorchFigures Figures(int32_t device) const;
  // Only the reserved, allocated and requested bytes now: cheap, for every event.
  TorchBytes Bytes(int32_t device) const;
  // The block that starts at `address` on `device` now (allocated, pending or free), or nullptr.
  const TorchBlock* BlockAt(int32_t device, uint64_t address) const;
  // The segment/block map of `device` now, by address.
  std::vector<TorchSegmentView> Map(int32_t device) const;
  // Calls fn(device, address, block) for each live tensor (allocated block) of `device`, or of every device for
  // kAllDevices.
  template <typename Fn>
  void ForEachTensor(int32_t device, Fn&& fn) const;
  static constexpr int32_t kAllDevices = -2;

 private:
  using SegmentIt = std::map<uint64_t, TorchSegment>::iterator;
  static constexpr size_t kSegmentCacheSize = 64;
  // The segment a lookup found, by the 2 MiB granule of the address looked up: a training step's events alternate
  // between a few segments (the small and the large pool), so a single remembered segment missed at each switch,
  // and each miss walked the tree (perf: the layer's costliest part of the summary). An entry answers for `address`
  // only if [start, end) holds it and no later segment starts at or before it (segments may overlap after a damaged
  // layout; the tree walk then answers as it always did).
  struct SegmentCacheEntry {
    SegmentIt segment;
    uint64_t start = 0;
    uint64_t end = 0;         // start + size
    uint64_t next_start = 0;  // where the next segment starts; ~0 for none
    uint64_t version = ~uint64_t{0};
  };
  // A block of a segment. Nearly every event names a block by the address where it starts (an ALLOC takes a free
  // block at its start, a FREE names the block it frees), so blocks are found by their address (block_index.h;
  // the node's segment tells apart the blocks of overlapping segments in a damaged trace), and
  // a segment's blocks are a list in address order for what needs neighbours (merging free blocks) or the order
  // (the map, a block found by an address inside it); an ordered tree per segment cost a walk, a node to allocate
  // and a rebalance per event. Nodes never move (chunked_vector.h), and dropped ones are reused.
  struct BlockNode {
    uint64_t address = 0;
    uint64_t segment = 0;  // its segment's start: with `address`, what names the block
    uint32_t prev = kNoBlock;
    uint32_t next = kNoBlock;
    TorchBlock block;
  };
  struct Device {
    TorchDeviceStats stats;
    std::map<uint64_t, TorchSegment> segments;  // by address
    ChunkedVector<BlockNode> nodes;
    std::vector<uint32_t> free_nodes;  // nodes no block uses
    BlockIndex index;  // every block's node, by its address
    // The reserved peak was just reached by a segment: its moment becomes the allocation that asked for it.
    bool reserved_peak_settling = false;
    // Bumped by every change to the segments' set or extents (SegmentsChanged): cached lookups older than it are
    // void.
    uint64_t segments_version = 0;
    std::array<SegmentCacheEntry, kSegmentCacheSize> segment_cache;
  };
  Device& ForDevice(int32_t device);
  // The segment containing `address`, or segments.end().
  SegmentIt SegmentAt(Device& d, uint64_t address);
  // Every erase of a segment goes through here (it drops the segment's blocks), and every other change to the
  // segments' set or extents calls SegmentsChanged: both void SegmentAt's cache.
  static SegmentIt EraseSegment(Device& d, SegmentIt it);
  static void SegmentsChanged(Device& d) { ++d.segments_version; }

  // Blocks (see BlockNode). A node index stays valid until its block is dropped.
  // The block of segment `s` starting at `address`, or kNoBlock.
  static uint32_t BlockStartingAt(const Device& d, SegmentIt s, uint64_t address);
  // The block of segment `s` holding `address` (which must lie in it): a walk of the segment's list. kNoBlock only
  // for a segment without blocks.
  static uint32_t BlockHolding(const Device& d, SegmentIt s, uint64_t address);
  // A free block at `address` placed after block `after` (kNoBlock: first) in segment `s`, unless a block of `s`
  // starts there already (a damaged layout: that one is kept as it is, and returned).
  static uint32_t PutFreeBlock(Device& d, SegmentIt s, uint32_t after, uint64_t address, uint64_t size,
                               uint64_t stream);
  // Takes block `i` out of its segment and frees its node.
  static void DropBlock(Device& d, TorchSegment& s, uint32_t i);
  // Moves blocks `i` and every one after it in segment `from` to the end of segment `to`.
  static void MoveBlocks(Device& d, TorchSegment& from, uint32_t i, SegmentIt to);

  void Alloc(Device& d, const Event& e, const EventStamp& when);
  // Where a FREE_* event's block is: its segment (or segments.end()) and the block starting at the address in it
  // (or kNoBlock). A FREE row (request and completion at once) looks it up once for both.
  struct BlockPlace {
    SegmentIt segment;
    uint32_t block;
  };
  BlockPlace Locate(Device& d, uint64_t address);
  void FreeRequested(Device& d, const BlockPlace& place);
  void FreeCompleted(Device& d, const BlockPlace& place);
  void SegmentAlloc(Device& d, const Event& e, const EventStamp& when);
  void SegmentFree(Device& d, const Event& e);
  void SegmentMap(Device& d, const Event& e, const EventStamp& when);
  void SegmentUnmap(Device& d, const Event& e);
  // Reserved bytes grow (a segment, a mapping): a new peak remembers what was allocated then.
  void AddReserved(Device& d, uint64_t bytes, const EventStamp& when);
  void Release(Device& d, TorchBlock& b);  // allocated -> pending: the tensor's life ends
  void Complete(Device& d, TorchBlock& b);  // pending -> free
  // Merges free block `i` with its free neighbours.
  static void MergeFree(Device& d, TorchSegment& s, uint32_t i);
  // Drops [address, address + size) from its segment (which must be free there), splitting the segment.
  void RemoveRange(Device& d, uint64_t address, uint64_t size);

  AllocatorConfig config_;
  AutogradStamp autograd_;
  std::map<int32_t, std::unique_ptr<Device>> devices_;
  Device* cached_ = nullptr;
};

template <typename Fn>
void AllocatorLayer::ForEachTensor(int32_t device, Fn&& fn) const {
  for (const auto& [ordinal, d] : devices_) {
    if (device != kAllDevices && ordinal != device) continue;
    for (const auto& [address, s] : d->segments) {
      for (uint32_t i = s.first; i != kNoBlock; i = d->nodes[i].next) {
        const BlockNode& n = d->nodes[i];
        if (n.block.state == TorchBlockState::kAllocated) fn(ordinal, n.address, n.block);
      }
    }
  }
}

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_LAYER_H_
