// The caching-allocator replay on hand-made request sequences, each checked against what PyTorch's documented
// behaviour gives (c10/cuda CUDACachingAllocator, native backend): a driver double records every segment asked for
// and released, and refuses beyond a capacity.
#include "analyzer/model/torch/allocator_replay.h"

#include <vector>

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kCard = uint64_t{80} << 30;

class FakeDriver : public ReplayDriver {
 public:
  explicit FakeDriver(uint64_t capacity) : capacity_(capacity) {}
  bool CapAllows(uint64_t, uint64_t) override { return true; }
  uint64_t Reserve(uint64_t size) override {
    reserved_ranges.push_back(size);
    return (uint64_t{1} << 40) + (reserved_ranges.size() - 1) * (uint64_t{1} << 38);
  }
  bool Map(uint64_t address, uint64_t size, uint64_t reserved_now) override {
    if (reserved_now + size > capacity_) return false;
    mapped.push_back({address, size});
    return true;
  }
  void Unmap(uint64_t address, uint64_t size) override { unmapped.push_back({address, size}); }
  bool Malloc(uint64_t size, uint64_t reserved_now, uint64_t* address) override {
    asked.push_back(size);
    if (reserved_now + size > capacity_) return false;
    *address = next_;
    next_ += size + 2 * kMiB;
    return true;
  }
  void Free(uint64_t address, uint64_t size) override { released.push_back({address, size}); }
  std::vector<uint64_t> asked;
  std::vector<std::pair<uint64_t, uint64_t>> released;
  std::vector<uint64_t> reserved_ranges;
  std::vector<std::pair<uint64_t, uint64_t>> mapped, unmapped;

 private:
  uint64_t capacity_;
  uint64_t next_ = uint64_t{1} << 30;
};

TEST(AllocatorReplay, SmallRequestsShareATwoMiBSegmentAndLargeOnesTwentyMiB) {
  FakeDriver driver(1ull << 40);
  CachingAllocatorReplay replay({}, &driver, kCard);
  const auto a = replay.Malloc(4, 0);       // 512 bytes, small pool: a 2 MiB segment
  const auto b = replay.Malloc(1000, 0);    // 1024 bytes, split off the same segment
  const auto c = replay.Malloc(3 * kMiB, 0);  // large pool, < 10 MiB: a 20 MiB segment
  ASSERT_TRUE(a.ok && b.ok && c.ok);
  EXPECT_EQ(driver.asked, (std::vector<uint64_t>{2 * kMiB, 20 * kMiB}));
  EXPECT_EQ(a.block_size, 512u);
  EXPECT_EQ(b.address, a.address + 512);
  EXPECT_EQ(b.block_size, 1024u);
  EXPECT_EQ(c.block_size, 3 * kMiB);
  EXPECT_EQ(replay.reserved(), 22 * kMiB);
  EXPECT_EQ(replay.allocated(), 3 * kMiB + 1536);
}

TEST(AllocatorReplay, BestFitTakesTheSmallestBlockThatFitsThenTheLowestAddress) {
  FakeDriver driver(1ull << 40);
  CachingAllocatorReplay replay({}, &driver, kCard);
  // Three segments of their own (>= 10 MiB requests are rounded to 2 MiB and not split when the rest is small).
  const auto big = replay.Malloc(40 * kMiB, 0);
  const auto mid1 = replay.Malloc(24 * kMiB, 0);
  const auto mid2 = replay.Malloc(24 * kMiB, 0);
  ASSERT_TRUE(replay.Free(big.address));
  ASSERT_TRUE(replay.Free(mid2.address));
  ASSERT_TRUE(replay.Free(mid1.address));
  // 22 MiB fits both 24 MiB blocks and the 40 MiB one: the smallest, lowest address first.
  const auto again = replay.Malloc(22 * kMiB, 0);
  EXPECT_EQ(again.address, mid1.address);
  // Another stream never takes this stream's blocks.
  const auto other = replay.Malloc(22 * kMiB, 7);
  EXPECT_NE(other.address, mid2.address);
  EXPECT_NE(other.address, big.address);
  EXPECT_EQ(driver.asked.size(), 4u);
}

TEST(AllocatorReplay, SplitRestMergesBackWhenFreed) {
  FakeDriver driver(1ull << 40);
  CachingAllocatorReplay replay({}, &driver, kCard);
  const auto first = replay.Malloc(12 * kMiB, 0);  // a 12 MiB segment, used whole
  ASSERT_TRUE(replay.Free(first.address));
  const auto a = replay.Malloc(5 * kMiB, 0);  // 12 MiB block: the 7 MiB rest is > 1 MiB, so it is split off
  EXPECT_EQ(a.address, first.address);
  EXPECT_EQ(a.block_size, 5 * kMiB);
  const auto b = replay.Malloc(6 * kMiB, 0);  // from the rest, split again (1 MiB left: not split, kept)
  EXPECT_EQ(b.address, first.address + 5 * kMiB);
  EXPECT_EQ(b.block_size, 7 * kMiB);
  EXPECT_EQ(driver.asked.size(), 1u);
  ASSERT_TRUE(replay.Free(a.address));
  ASSERT_TRUE(replay.Free(b.address));
  EXPECT_EQ(replay.largest_free_block(), 12 * kMiB);  // merged whole again
  EXPECT_EQ(replay.ReleaseCachedSegments(), 12 * kMiB);
  EXPECT_EQ(replay.reserved(), 0u);
}

TEST(AllocatorReplay, OversizeBlocksServeOnlyOversizeRequestsThatAreNotMuchSmaller) {
  AllocatorConfig config = ParseAllocatorConfig("max_split_size_mb:100");
  FakeDriver driver(1ull << 40);
  CachingAllocatorReplay replay(config, &driver, kCard);
  const auto huge = replay.Malloc(200 * kMiB, 0);
  ASSERT_TRUE(replay.Free(huge.address));
  // 30 MiB < max_split_size: the 200 MiB oversize block is not used, a new segment is made.
  const auto small = replay.Malloc(30 * kMiB, 0);
  EXPECT_NE(small.address, huge.address);
  // 150 MiB: oversize, but 200 >= 150 + 20: not used either.
  const auto big = replay.Malloc(150 * kMiB, 0);
  EXPECT_NE(big.address, huge.address);
  // 190 MiB: within 20 MiB of it, and taken whole (oversize blocks are never split).
  const auto close = replay.Malloc(190 * kMiB, 0);
  EXPECT_EQ(close.address, huge.address);
  EXPECT_EQ(close.block_size, 200 * kMiB);
}

TEST(AllocatorReplay, RefusedDriverReleasesWholeFreeSegmentsThenRetries) {
  FakeDriver driver(100 * kMiB);
  CachingAllocatorReplay replay({}, &driver, kCard);
  const auto a = replay.Malloc(40 * kMiB, 0);
  const auto b = replay.Malloc(40 * kMiB, 0);
  ASSERT_TRUE(replay.Free(a.address));  // cached, wholly free
  // 50 MiB does not fit the 40 MiB cached block; 80 + 50 > 100: released (40 MiB), then retried: 40 + 50 fits.
  const auto c = replay.Malloc(50 * kMiB, 0);
  ASSERT_TRUE(c.ok);
  EXPECT_TRUE(c.recovered);
  EXPECT_EQ(c.released_bytes, 40 * kMiB);
  EXPECT_EQ(driver.released, (std::vector<std::pair<uint64_t, uint64_t>>{{a.address, 40 * kMiB}}));
  // Now 90 MiB reserved, all in tensors: 20 MiB more cannot be had, whatever is released.
  const auto d = replay.Malloc(20 * kMiB, 0);
  EXPECT_FALSE(d.ok);
  EXPECT_TRUE(replay.Free(b.address));
  EXPECT_FALSE(replay.Free(b.address));  // not twice
}

// garbage_collection_threshold:0.5 under a 100 MiB cap: before new memory is asked for with more than 50 MiB
// reserved, cached whole segments at least as old (in the pool's free-block searches) as their mean are released.
TEST(AllocatorReplay, GarbageCollectionReleasesTheOlderCachedSegmentsUnderACap) {
  FakeDriver driver(1ull << 40);
  AllocatorConfig config = ParseAllocatorConfig("garbage_collection_threshold:0.5");
  CachingAllocatorReplay replay(config, &driver, kCard);
  replay.SetMemoryCap(100 * kMiB);
  const auto a = replay.Malloc(20 * kMiB, 0);  // searches 1..3, each a new segment (reserved <= 50 MiB)
  const auto b = replay.Malloc(22 * kMiB, 0);
  const auto c = replay.Malloc(24 * kMiB, 0);
  ASSERT_TRUE(a.ok && b.ok && c.ok);
  ASSERT_TRUE(replay.Free(a.address));  // cached after 3 searches
  ASSERT_TRUE(replay.Free(b.address));
  const auto b2 = replay.Malloc(21 * kMiB, 0);  // search 4 takes b's segment whole; freed again: younger than a's
  ASSERT_EQ(b2.address, b.address);
  ASSERT_TRUE(replay.Free(b2.address));
  // Search 5 finds nothing for 30 MiB; 66 MiB reserved > 50: ages 2 (a) and 1 (b), mean 1.5: a goes, b stays.
  const auto d = replay.Malloc(30 * kMiB, 0);
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(driver.released, (std::vector<std::pair<uint64_t, uint64_t>>{{a.address, 20 * kMiB}}));
  EXPECT_EQ(replay.reserved(), 76 * kMiB);
}

TEST(AllocatorReplay, GarbageCollectionSweepsEveryBlockAsOldAsTheMeanAndNothingWithoutACap) {
  for (const uint64_t cap : {100 * kMiB, uint64_t{0}}) {
    FakeDriver driver(1ull << 40);
    CachingAllocatorReplay replay(ParseAllocatorConfig("garbage_collection_threshold:0.5"), &driver, kCard);
    replay.SetMemoryCap(cap);
    const auto a = replay.Malloc(20 * kMiB, 0);
    const auto b = replay.Malloc(22 * kMiB, 0);
    const auto c = replay.Malloc(24 * kMiB, 0);
    ASSERT_TRUE(a.ok && b.ok && c.ok);
    ASSERT_TRUE(replay.Free(a.address));
    ASSERT_TRUE(replay.Free(b.address));
    // Equal ages: both are released, past the 16 MiB wanted (a sweep does not stop at the target).
    ASSERT_TRUE(replay.Malloc(30 * kMiB, 0).ok);
    if (cap != 0) {
      EXPECT_EQ(driver.released, (std::vector<std::pair<uint64_t, uint64_t>>{{a.address, 20 * kMiB},
                                                                             {b.address, 22 * kMiB}}));
      EXPECT_EQ(replay.reserved(), 54 * kMiB);
    } else {  // PyTorch applies the threshold only under a cap
      EXPECT_TRUE(driver.released.empty());
      EXPECT_EQ(replay.reserved(), 96 * kMiB);
    }
  }
}

TEST(AllocatorReplay, WithMaxSplitSizeOversizeBlocksAreReleasedFirstLargestFirst) {
  AllocatorConfig config = ParseAllocatorConfig("max_split_size_mb:20");
  FakeDriver driver(130 * kMiB);
  CachingAllocatorReplay replay(config, &driver, kCard);
  const auto a = replay.Malloc(30 * kMiB, 0);
  const auto b = replay.Malloc(40 * kMiB, 0);
  const auto small = replay.Malloc(2 * kMiB, 0);  // a 20 MiB segment, kept in use
  ASSERT_TRUE(a.ok && b.ok && small.ok);
  ASSERT_TRUE(replay.Free(a.address));
  ASSERT_TRUE(replay.Free(b.address));
  // 60 MiB: no cached block is large enough; 90 + 60 > 130. Oversize blocks of this stream are released from the
  // largest (40) until 60 MiB are free (then 30), and the retry succeeds.
  const auto c = replay.Malloc(60 * kMiB, 0);
  ASSERT_TRUE(c.ok);
  EXPECT_EQ(driver.released,
            (std::vector<std::pair<uint64_t, uint64_t>>{{b.address, 40 * kMiB}, {a.address, 30 * kMiB}}));
}

TEST(AllocatorReplay, RoundupPower2DivisionsChangeTheBlockSize) {
  AllocatorConfig config = ParseAllocatorConfig("roundup_power2_divisions:4");
  FakeDriver driver(1ull << 40);
  CachingAllocatorReplay replay(config, &driver, kCard);
  // 1.1 MiB with 4 divisions of [1, 2) MiB rounds to 1.25 MiB.
  const auto a = replay.Malloc(1153434, 0);
  EXPECT_EQ(a.block_size, 1310720u);
}

// Expandable segments: one reserved range per pool and stream, pages mapped at its end as requests need them (20 MiB
// pages for the large pool), a freed block merged back, and releasing cache unmapping the whole pages of free
// blocks (a partial page stays mapped).
TEST(AllocatorReplay, ExpandableSegmentsMapPagesAndUnmapWholePages) {
  AllocatorConfig config = ParseAllocatorConfig("expandable_segments:True");
  FakeDriver driver(1ull << 40);
  CachingAllocatorReplay replay(config, &driver, kCard);
  const uint64_t base = uint64_t{1} << 40;
  const auto a = replay.Malloc(30 * kMiB, 0);  // two 20 MiB pages at the start of a new range
  ASSERT_TRUE(a.ok);
  EXPECT_EQ(a.address, base);
  EXPECT_EQ(a.block_size, 30 * kMiB);  // split at 512 bytes with expandable segments
  EXPECT_EQ(driver.reserved_ranges.size(), 1u);
  EXPECT_EQ(driver.reserved_ranges[0] % (20 * kMiB), 0u);
  EXPECT_GE(driver.reserved_ranges[0], kCard + kCard / 8);
  EXPECT_EQ(driver.mapped, (std::vector<std::pair<uint64_t, uint64_t>>{{base, 40 * kMiB}}));
  // 15 MiB: 10 MiB are free after a; one more page is mapped behind them, and the block lands right after a.
  const auto b = replay.Malloc(15 * kMiB, 0);
  EXPECT_EQ(b.address, base + 30 * kMiB);
  EXPECT_EQ(driver.mapped.back(), (std::pair<uint64_t, uint64_t>{base + 40 * kMiB, 20 * kMiB}));
  EXPECT_EQ(replay.reserved(), 60 * kMiB);
  EXPECT_EQ(driver.reserved_ranges.size(), 1u);
  // A small request gets its own range (the small pool), with a 2 MiB page.
  const auto s = replay.Malloc(1000, 0);
  EXPECT_EQ(driver.reserved_ranges.size(), 2u);
  EXPECT_EQ(driver.mapped.back().second, 2 * kMiB);
  ASSERT_TRUE(s.ok);
  // Freeing a then releasing cache: a's 30 MiB merge with nothing (b is live): page 0 is whole and unmapped, the
  // 10 MiB of page 1 before b stay mapped.
  ASSERT_TRUE(replay.Free(a.address));
  // The small range's free rest (2 MiB - 1024 after s) holds no whole page: it stays mapped.
  EXPECT_EQ(replay.ReleaseCachedSegments(), 20 * kMiB);
  EXPECT_EQ(driver.unmapped, (std::vector<std::pair<uint64_t, uint64_t>>{{base, 20 * kMiB}}));
  EXPECT_EQ(replay.reserved(), 40 * kMiB + 2 * kMiB);
  // A request that fits the freed address space at the start maps it again there.
  const auto c = replay.Malloc(25 * kMiB, 0);
  EXPECT_EQ(c.address, base);
  EXPECT_EQ(driver.mapped.back(), (std::pair<uint64_t, uint64_t>{base, 20 * kMiB}));
}
}  // namespace
}  // namespace cumemtrace::analyzer
