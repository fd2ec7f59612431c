// The allocator layer on hand-made TORCH_* event sequences: PyTorch's rounding and split rules (small and large
// pool, max_split_size, expandable segments, roundup_power2_divisions), the counters memory_stats() keeps
// (allocation, allocated_bytes, requested_bytes, active_bytes, reserved_bytes, segment) with exact values, pending
// frees, blocks that predate the tracker, and the segment/block map.
#include "analyzer/model/torch/allocator_layer.h"

#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "proto/format.h"

namespace cumemtrace::analyzer {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

class Replay {
 public:
  explicit Replay(const std::string& config = "") : layer_(ParseAllocatorConfig(config)) {}

  void Ev(format::Api api, uint64_t address, uint64_t size = 0, uint64_t stack = 0, int32_t device = 0) {
    Event e;
    e.seq = ++seq_;
    e.time_ns = static_cast<int64_t>(seq_) * 1000;
    e.api = api;
    e.info = format::FindApi(static_cast<uint32_t>(api));
    e.device = device;
    e.address = address;
    e.size = size;
    e.stack = stack;
    layer_.Apply(e, index_++);
  }
  void Segment(uint64_t address, uint64_t size) { Ev(format::Api::kTorchSegmentAlloc, address, size); }
  void Alloc(uint64_t address, uint64_t size, uint64_t stack = 1) { Ev(format::Api::kTorchAlloc, address, size, stack); }
  void Free(uint64_t address) {
    Ev(format::Api::kTorchFreeRequested, address);
    Ev(format::Api::kTorchFreeCompleted, address);
  }
  const TorchDeviceStats& Stats() const { return *layer_.Find(0); }
  TorchFigures Figures() const { return layer_.Figures(0); }
  // The extent of the block at `address`, 0 if none.
  uint64_t Extent(uint64_t address) const {
    for (const TorchSegmentView& s : layer_.Map(0)) {
      for (const TorchBlockView& b : s.blocks) {
        if (b.address == address) return b.block.size;
      }
    }
    return 0;
  }
  AllocatorLayer& layer() { return layer_; }

 private:
  AllocatorLayer layer_;
  uint64_t seq_ = 0;
  uint64_t index_ = 0;
};

TEST(AllocatorRules, RoundSize) {
  const AllocatorConfig defaults = ParseAllocatorConfig("");
  EXPECT_EQ(TorchRoundSize(1, defaults), 512u);
  EXPECT_EQ(TorchRoundSize(512, defaults), 512u);
  EXPECT_EQ(TorchRoundSize(513, defaults), 1024u);
  EXPECT_EQ(TorchRoundSize(3 * kMiB + 1, defaults), 3 * kMiB + 512);
  // roundup_power2_divisions:4 -> 1200 stays 512-rounded (not above 512 * 4), 5 MiB + 1 goes to 6 MiB.
  const AllocatorConfig four = ParseAllocatorConfig("roundup_power2_divisions:4");
  EXPECT_EQ(TorchRoundSize(1200, four), 1536u);
  EXPECT_EQ(TorchRoundSize(5 * kMiB + 1, four), 6 * kMiB);
  EXPECT_EQ(TorchRoundSize(4 * kMiB, four), 4 * kMiB);
  // List form: [256:1,512:2,1024:4,>:8] (MiB boundaries).
  const AllocatorConfig list = ParseAllocatorConfig("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
  EXPECT_TRUE(list.roundup_list);
  EXPECT_EQ(list.roundup_divisions[0], 1u);
  EXPECT_EQ(list.roundup_divisions[8], 1u);
  EXPECT_EQ(list.roundup_divisions[9], 2u);
  EXPECT_EQ(list.roundup_divisions[10], 4u);
  EXPECT_EQ(list.roundup_divisions[11], 8u);
  EXPECT_EQ(list.roundup_divisions[15], 8u);
  EXPECT_EQ(TorchRoundSize(600 * kMiB, list), 768 * kMiB);
}

TEST(AllocatorRules, Config) {
  const AllocatorConfig c =
      ParseAllocatorConfig(" expandable_segments:True, max_split_size_mb:200,garbage_collection_threshold:0.6");
  EXPECT_TRUE(c.expandable_segments);
  EXPECT_EQ(c.max_split_size, 200 * kMiB);
  EXPECT_TRUE(c.unmodelled.empty());
  EXPECT_EQ(ParseAllocatorConfig("max_split_size_mb:5").max_split_size, 20 * kMiB);  // PyTorch's minimum
  const AllocatorConfig odd = ParseAllocatorConfig("expandable_segments:False,large_segment_size_mb:64");
  EXPECT_FALSE(odd.expandable_segments);
  ASSERT_EQ(odd.unmodelled.size(), 1u);
  EXPECT_EQ(odd.unmodelled[0], "large_segment_size_mb:64");
  EXPECT_TRUE(ParseAllocatorConfig("backend:cudaMallocAsync").cuda_malloc_async);
}

TEST(AllocatorRules, ShouldSplit) {
  const AllocatorConfig d = ParseAllocatorConfig("");
  EXPECT_TRUE(TorchShouldSplit(2 * kMiB, 512, true, d));          // small pool: any remainder >= 512
  EXPECT_FALSE(TorchShouldSplit(2 * kMiB, 2 * kMiB - 256, true, d));
  EXPECT_FALSE(TorchShouldSplit(20 * kMiB, 19 * kMiB, false, d));  // large: remainder must exceed 1 MiB
  EXPECT_TRUE(TorchShouldSplit(20 * kMiB, 18 * kMiB, false, d));
  const AllocatorConfig m = ParseAllocatorConfig("max_split_size_mb:20");
  EXPECT_FALSE(TorchShouldSplit(100 * kMiB, 30 * kMiB, false, m));  // oversize requests are never split
  const AllocatorConfig e = ParseAllocatorConfig("expandable_segments:True");
  EXPECT_TRUE(TorchShouldSplit(20 * kMiB, 20 * kMiB - 512, false, e));
}

// Small pool: 2 MiB segments, split down to 512 bytes; the remainder below 512 stays with the block.
TEST(AllocatorLayer, SmallPoolSplitsAndMerges) {
  Replay r;
  r.Segment(0x100000, 2 * kMiB);
  r.Alloc(0x100000, 1000, 1);  // -> 1024
  r.Alloc(0x100400, 100, 2);   // -> 512
  r.Alloc(0x100600, 2 * kMiB - 0x600 - 300, 3);  // 300 bytes short of the end: rounds to the whole rest
  EXPECT_EQ(r.Extent(0x100000), 1024u);
  EXPECT_EQ(r.Extent(0x100400), 512u);
  EXPECT_EQ(r.Extent(0x100600), 2 * kMiB - 0x600);
  const TorchDeviceStats& s = r.Stats();
  EXPECT_EQ(s.allocations.current, 3u);
  EXPECT_EQ(s.allocated_bytes.current, 2 * kMiB);
  EXPECT_EQ(s.requested_bytes.current, 1000u + 100u + (2 * kMiB - 0x600 - 300));
  EXPECT_EQ(s.reserved_bytes.current, 2 * kMiB);
  EXPECT_EQ(s.segments.current, 1u);
  EXPECT_EQ(s.mismatches, 0u);
  r.Free(0x100400);
  r.Free(0x100000);  // merges with the free block after it
  TorchFigures f = r.Figures();
  EXPECT_EQ(f.cached_free_bytes, 1536u);
  EXPECT_EQ(f.largest_free_block, 1536u);
  EXPECT_EQ(r.Extent(0x100000), 1536u);
  EXPECT_EQ(f.allocated_bytes, 2 * kMiB - 0x600);
  EXPECT_EQ(f.reserved_bytes - f.allocated_bytes, 1536u);
  EXPECT_EQ(s.allocated_bytes.peak, 2 * kMiB);
}

// Large pool: a 5 MiB request takes a 20 MiB segment and splits (15 MiB left > 1 MiB); a 19.5 MiB request in a
// 20 MiB free block does not (0.5 MiB left): its extent is the whole block.
TEST(AllocatorLayer, LargePoolUnsplitRemainderBelongsToTheBlock) {
  Replay r;
  r.Segment(0x10000000, 20 * kMiB);
  r.Alloc(0x10000000, 5 * kMiB);
  EXPECT_EQ(r.Extent(0x10000000), 5 * kMiB);
  EXPECT_EQ(r.Extent(0x10000000 + 5 * kMiB), 15 * kMiB);  // the free rest
  r.Free(0x10000000);
  EXPECT_EQ(r.Extent(0x10000000), 20 * kMiB);  // merged back
  r.Alloc(0x10000000, 19 * kMiB + 512 * 1024);
  EXPECT_EQ(r.Extent(0x10000000), 20 * kMiB);
  EXPECT_EQ(r.Stats().allocated_bytes.current, 20 * kMiB);
  EXPECT_EQ(r.Stats().requested_bytes.current, 19 * kMiB + 512 * 1024);
  EXPECT_EQ(r.Figures().largest_free_block, 0u);
}

TEST(AllocatorLayer, MaxSplitSizeKeepsOversizeBlocksWhole) {
  Replay r("max_split_size_mb:100");
  r.Segment(0x10000000, 400 * kMiB);
  r.Alloc(0x10000000, 390 * kMiB);  // >= max_split_size: never split, 10 MiB stays with it
  EXPECT_EQ(r.Extent(0x10000000), 400 * kMiB);
  EXPECT_EQ(r.Stats().allocated_bytes.current, 400 * kMiB);
}

// A free waits for the streams that used the block: allocation and allocated_bytes drop at FREE_REQUESTED,
// requested_bytes and active_bytes at FREE_COMPLETED, and the block merges only then.
TEST(AllocatorLayer, PendingFrees) {
  Replay r;
  r.Segment(0x100000, 2 * kMiB);
  r.Alloc(0x100000, 4096);
  r.Ev(format::Api::kTorchFreeRequested, 0x100000);
  TorchFigures f = r.Figures();
  EXPECT_EQ(f.allocations, 0u);
  EXPECT_EQ(f.allocated_bytes, 0u);
  EXPECT_EQ(f.requested_bytes, 4096u);
  EXPECT_EQ(f.active_bytes, 4096u);
  EXPECT_EQ(f.pending_free_bytes, 4096u);
  EXPECT_EQ(f.largest_free_block, 2 * kMiB - 4096);
  r.Ev(format::Api::kTorchFreeCompleted, 0x100000);
  f = r.Figures();
  EXPECT_EQ(f.requested_bytes, 0u);
  EXPECT_EQ(f.active_bytes, 0u);
  EXPECT_EQ(f.largest_free_block, 2 * kMiB);
  EXPECT_EQ(r.Stats().requested_bytes.peak, 4096u);
}

// torch.free (the preload's one row for a free PyTorch completes at once) is a request and a completion.
TEST(AllocatorLayer, FreeRowIsRequestAndCompletion) {
  Replay r;
  r.Segment(0x100000, 2 * kMiB);
  r.Alloc(0x100000, 4096);
  r.Alloc(0x101000, 512);
  r.Ev(format::Api::kTorchFree, 0x100000);
  TorchFigures f = r.Figures();
  EXPECT_EQ(f.allocations, 1u);
  EXPECT_EQ(f.requested_bytes, 512u);
  EXPECT_EQ(f.pending_free_bytes, 0u);
  EXPECT_EQ(r.Stats().requested_bytes.peak, 4608u);
  EXPECT_EQ(r.Stats().mismatches, 0u);
}

// Blocks allocated before the tracker was attached: their frees are counted as predating it, never as anomalies;
// an allocation in a segment the layer never saw is an estimate, not reserved.
TEST(AllocatorLayer, BlocksThatPredateTheTracker) {
  Replay r;
  r.Free(0x5000000);
  EXPECT_EQ(r.Stats().predating_frees, 1u);
  EXPECT_EQ(r.Stats().mismatches, 0u);
  EXPECT_EQ(r.Stats().allocations.current, 0u);
  r.Ev(format::Api::kTorchSegmentFree, 0x4000000, 20 * kMiB);
  EXPECT_EQ(r.Stats().predating_segment_frees, 1u);
  EXPECT_EQ(r.Stats().reserved_bytes.current, 0u);
  r.Alloc(0x7000000, 1000);
  EXPECT_EQ(r.Stats().estimated_blocks, 1u);
  EXPECT_EQ(r.Stats().allocated_bytes.current, 1024u);
  EXPECT_EQ(r.Figures().reserved_bytes, 0u);
  r.Free(0x7000000);
  EXPECT_EQ(r.Stats().allocated_bytes.current, 0u);
  EXPECT_TRUE(r.layer().Map(0).empty());  // the made-up segment is gone with its block
}

// Expandable segments: SEGMENT_MAP grows reserved (never the segment count), adjacent mappings form one range whose
// free blocks merge, any remainder of 512 bytes or more is split off, and SEGMENT_UNMAP cuts the range.
TEST(AllocatorLayer, ExpandableSegments) {
  Replay r("expandable_segments:True");
  const uint64_t base = 0x7f0000000000;
  r.Ev(format::Api::kTorchSegmentMap, base, 20 * kMiB);
  r.Alloc(base, 15 * kMiB + 1000);
  EXPECT_EQ(r.Extent(base), 15 * kMiB + 1024);  // 5 MiB - 1 KiB left: split, as any remainder >= 512
  r.Ev(format::Api::kTorchSegmentMap, base + 20 * kMiB, 20 * kMiB);
  r.Alloc(base + 15 * kMiB + 1024, 24 * kMiB);
  EXPECT_EQ(r.Extent(base + 15 * kMiB + 1024), 24 * kMiB);
  const TorchFigures f = r.Figures();
  EXPECT_EQ(f.reserved_bytes, 40 * kMiB);
  EXPECT_EQ(f.segments, 0u);
  EXPECT_EQ(f.allocated_bytes, 39 * kMiB + 1024);
  EXPECT_EQ(f.largest_free_block, 1 * kMiB - 1024);
  ASSERT_EQ(r.layer().Map(0).size(), 1u);
  EXPECT_EQ(r.layer().Map(0)[0].size, 40 * kMiB);
  // Free the first block, unmap its first 2 MiB granules as an OOM would: the range splits in two.
  r.Free(base);
  r.Ev(format::Api::kTorchSegmentUnmap, base, 14 * kMiB);
  EXPECT_EQ(r.Figures().reserved_bytes, 26 * kMiB);
  const std::vector<TorchSegmentView> map = r.layer().Map(0);
  ASSERT_EQ(map.size(), 1u);
  EXPECT_EQ(map[0].address, base + 14 * kMiB);
  EXPECT_EQ(map[0].size, 26 * kMiB);
  EXPECT_EQ(map[0].blocks.front().block.size, 1 * kMiB + 1024);
  EXPECT_FALSE(map[0].small_pool);
  EXPECT_EQ(r.Stats().mismatches, 0u);
}

// PyTorch keeps an expandable segment per pool: a mapped range whose blocks are small requests is the small pool's
// (PyTorch's snapshot calls it segment_type "small"), whatever its size.
TEST(AllocatorLayer, ExpandableSegmentOfTheSmallPool) {
  Replay r("expandable_segments:True");
  const uint64_t base = 0x7f0000000000;
  r.Ev(format::Api::kTorchSegmentMap, base, 2 * kMiB);
  EXPECT_FALSE(r.layer().Map(0)[0].small_pool) << "no block yet";
  r.Alloc(base, 4096);
  r.Ev(format::Api::kTorchSegmentMap, base + 2 * kMiB, 2 * kMiB);
  const std::vector<TorchSegmentView> map = r.layer().Map(0);
  ASSERT_EQ(map.size(), 1u);
  EXPECT_EQ(map[0].size, 4 * kMiB);
  EXPECT_TRUE(map[0].small_pool);
  EXPECT_EQ(r.Extent(base), 4096u);
}

// BlockAt: the block starting at an address, in whatever state; nothing inside a block or outside every segment.
TEST(AllocatorLayer, BlockAt) {
  Replay r;
  r.Segment(0x10000000, 2 * kMiB);
  r.Alloc(0x10000000, 1000, 7);
  const TorchBlock* b = r.layer().BlockAt(0, 0x10000000);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->state, TorchBlockState::kAllocated);
  EXPECT_EQ(b->requested, 1000u);
  EXPECT_EQ(b->stack, 7u);
  EXPECT_EQ(r.layer().BlockAt(0, 0x10000001), nullptr);
  EXPECT_EQ(r.layer().BlockAt(0, 0x20000000), nullptr);
  EXPECT_EQ(r.layer().BlockAt(1, 0x10000000), nullptr);
  ASSERT_NE(r.layer().BlockAt(0, 0x10000400), nullptr);
  EXPECT_EQ(r.layer().BlockAt(0, 0x10000400)->state, TorchBlockState::kFree);
  r.Ev(format::Api::kTorchFreeRequested, 0x10000000);
  EXPECT_EQ(r.layer().BlockAt(0, 0x10000000)->state, TorchBlockState::kPendingFree);
}

// Peaks: allocated_bytes' peak and the reserved peak, with reserved - allocated when the allocation that grew the
// cache returned.
TEST(AllocatorLayer, Peaks) {
  Replay r;
  r.Segment(0x10000000, 20 * kMiB);
  r.Alloc(0x10000000, 8 * kMiB, 7);
  r.Segment(0x20000000, 20 * kMiB);
  r.Alloc(0x20000000, 12 * kMiB, 8);
  r.Free(0x10000000);
  const TorchDeviceStats& s = r.Stats();
  EXPECT_EQ(s.reserved_bytes.peak, 40 * kMiB);
  EXPECT_EQ(s.allocated_at_reserved_peak, 20 * kMiB);
  EXPECT_EQ(s.allocations_at_reserved_peak, 2u);
  EXPECT_EQ(s.reserved_bytes.peak_at.index, 3u);  // the ALLOC after the segment
  EXPECT_EQ(s.allocated_bytes.peak, 20 * kMiB);
  ASSERT_EQ(s.freed_since_allocated_peak.size(), 1u);
  EXPECT_EQ(s.freed_since_allocated_peak[0].stack, 7u);
  ASSERT_EQ(s.freed_since_reserved_peak.size(), 1u);
}

// Long plausible streams, each event picked from the layer's own map (allocations at free blocks' starts, frees of
// live or pending blocks, segments made, freed, mapped next to others and unmapped in part), with every invariant
// the reports rely on checked after each event: each segment's blocks start at its address, follow each other with
// no gap and cover it exactly; every block is found again by its address (the blocks' index agrees with the
// segments' lists); and the counters are the sums over the blocks.
void CheckLayout(const AllocatorLayer& layer, uint64_t event) {
  uint64_t allocated = 0, active = 0, allocations = 0, reserved = 0;
  for (const TorchSegmentView& s : layer.Map(0)) {
    ASSERT_FALSE(s.blocks.empty()) << "event " << event;
    uint64_t at = s.address;
    for (const TorchBlockView& b : s.blocks) {
      ASSERT_EQ(b.address, at) << "event " << event << ", segment " << s.address;
      const TorchBlock* found = layer.BlockAt(0, b.address);
      ASSERT_NE(found, nullptr) << "event " << event << ", block " << b.address;
      ASSERT_EQ(found->size, b.block.size);
      ASSERT_EQ(found->state, b.block.state);
      at += b.block.size;
      if (b.block.state != TorchBlockState::kFree) active += b.block.size;
      if (b.block.state == TorchBlockState::kAllocated) {
        allocated += b.block.size;
        ++allocations;
      }
    }
    ASSERT_EQ(at, s.address + s.size) << "event " << event << ", segment " << s.address;
    reserved += s.size;
  }
  const TorchDeviceStats* st = layer.Find(0);
  if (st == nullptr) return;
  ASSERT_EQ(st->allocated_bytes.current, allocated) << "event " << event;
  ASSERT_EQ(st->active_bytes.current, active) << "event " << event;
  ASSERT_EQ(st->allocations.current, allocations) << "event " << event;
  ASSERT_EQ(st->reserved_bytes.current, reserved) << "event " << event;
}

void ReplayPlausibleStream(unsigned seed, bool expandable) {
  Replay r(expandable ? "expandable_segments:True" : "");
  std::mt19937_64 rng(seed);
  uint64_t next_segment = 0x7f0000000000;
  for (uint64_t k = 0; k < 4000; ++k) {
    const std::vector<TorchSegmentView> map = r.layer().Map(0);
    std::vector<std::pair<uint64_t, uint64_t>> free_blocks, free_segments;
    std::vector<uint64_t> live, pending;
    for (const TorchSegmentView& s : map) {
      bool all_free = true;
      for (const TorchBlockView& b : s.blocks) {
        if (b.block.state == TorchBlockState::kFree) {
          free_blocks.emplace_back(b.address, b.block.size);
        } else {
          (b.block.state == TorchBlockState::kAllocated ? live : pending).push_back(b.address);
          all_free = false;
        }
      }
      if (all_free) free_segments.emplace_back(s.address, s.size);
    }
    const uint64_t roll = rng() % 100;
    if (roll < 3 || free_blocks.empty()) {
      const uint64_t size = rng() % 2 ? 2 * kMiB : (rng() % 4 + 1) * 20 * kMiB;
      // An expandable segment grows at its end, or a range is mapped apart from the others.
      const uint64_t at = expandable && !map.empty() && rng() % 2 ? map.back().address + map.back().size : next_segment;
      r.Ev(expandable ? format::Api::kTorchSegmentMap : format::Api::kTorchSegmentAlloc, at, size);
      next_segment = std::max(next_segment, at + size) + (rng() % 2 ? 2 * kMiB : 0);
    } else if (roll < 5 && !free_segments.empty()) {
      const auto [address, size] = free_segments[rng() % free_segments.size()];
      if (expandable) {
        r.Ev(format::Api::kTorchSegmentUnmap, address, std::min<uint64_t>(size, (rng() % 4 + 1) * 2 * kMiB));
      } else {
        r.Ev(format::Api::kTorchSegmentFree, address, size);
      }
    } else if (roll < 55) {
      const auto [address, size] = free_blocks[rng() % free_blocks.size()];
      const uint64_t want = rng() % 3 == 0 ? size - rng() % std::min<uint64_t>(size, 1024)
                                           : rng() % std::min<uint64_t>(size, 8 * kMiB);
      r.Alloc(address, std::max<uint64_t>(want, 1), rng() % 50 + 1);
    } else if (roll < 85 && !live.empty()) {
      const uint64_t address = live[rng() % live.size()];
      r.Ev(rng() % 3 ? format::Api::kTorchFree : format::Api::kTorchFreeRequested, address);
    } else if (!pending.empty()) {
      r.Ev(format::Api::kTorchFreeCompleted, pending[rng() % pending.size()]);
    }
    CheckLayout(r.layer(), k);
    if (testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(r.Stats().estimated_blocks, 0u);
  EXPECT_GT(r.Stats().alloc_events, 1000u) << "the stream allocates";
}

TEST(AllocatorLayer, LayoutStaysWholeOnPlausibleStreams) {
  for (unsigned seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    ReplayPlausibleStream(seed, false);
    ReplayPlausibleStream(seed, true);
  }
}

}  // namespace
}  // namespace cumemtrace::analyzer
