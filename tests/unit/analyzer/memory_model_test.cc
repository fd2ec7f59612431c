// MemoryModel and Timelines: what each event does to the live set, the per-(device, kind) timelines, the device
// total (which never counts vmm_mapped, address_reserve or host memory), and peaks.
#include "analyzer/model/memory/memory_model.h"

#include <map>
#include <random>

#include "analyzer/model/stacks/grouped_snapshot.h"
#include "analyzer/reader/api_lookup.h"
#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

using format::Api;
using format::Kind;

Event E(uint64_t seq, Api api, uint64_t address, uint64_t size = 0, int32_t device = 0, uint64_t stack = 0,
        int32_t result = 0) {
  Event e;
  e.seq = seq;
  e.time_ns = static_cast<int64_t>(seq) * 100;
  e.api = api;
  e.info = LookupApi(static_cast<uint32_t>(api));
  e.address = address;
  e.size = size;
  e.device = device;
  e.stack = stack;
  e.result = result;
  return e;
}

const Series& S(const MemoryModel& m, int32_t device, Kind kind) {
  const Series* s = m.timelines().Find(device, static_cast<int>(kind));
  EXPECT_NE(s, nullptr);
  static const Series kEmpty;
  return s != nullptr ? *s : kEmpty;
}

TEST(ApiLookup, MatchesTheTable) {
  for (uint32_t v = 0; v < 200; ++v) EXPECT_EQ(LookupApi(v), format::FindApi(v)) << v;
}

TEST(LiveSet, MatchesAStdMapUnderRandomOperations) {
  std::mt19937_64 rng(9);
  LiveSet live;
  std::map<std::pair<int, uint64_t>, uint64_t> reference;  // (space, address) -> size
  for (int i = 0; i < 300000; ++i) {
    const auto space = static_cast<format::Space>(rng() % 4);
    // A phase of growth, then of shrinking, over keys that share low bits (clustered homes).
    const uint64_t address = (rng() % (i < 150000 ? 50000 : 5000)) << 12;
    const std::pair<int, uint64_t> key{static_cast<int>(space), address};
    if (rng() % 3 != 0 && i < 150000) {
      Allocation a;
      a.size = rng();
      a.kind = Kind::kDevice;
      a.space = space;
      Allocation old;
      const bool replaced = live.Insert(address, a, &old);
      ASSERT_EQ(replaced, reference.count(key) == 1);
      if (replaced) {
        EXPECT_EQ(old.size, reference[key]);
      }
      reference[key] = a.size;
    } else {
      Allocation old;
      const bool removed = live.Remove(space, address, &old);
      ASSERT_EQ(removed, reference.count(key) == 1);
      if (removed) {
        EXPECT_EQ(old.size, reference[key]);
        reference.erase(key);
      }
    }
    if (i % 1000 == 0) {
      ASSERT_EQ(live.size(), reference.size());
      for (int probe = 0; probe < 20; ++probe) {
        const auto s2 = static_cast<format::Space>(rng() % 4);
        const uint64_t a2 = (rng() % 50000) << 12;
        const Allocation* found = live.Find(s2, a2);
        auto it = reference.find({static_cast<int>(s2), a2});
        ASSERT_EQ(found != nullptr, it != reference.end());
        if (found != nullptr) {
          EXPECT_EQ(found->size, it->second);
        }
      }
    }
  }
  size_t seen = 0;
  live.ForEach([&](uint64_t address, const Allocation& a) {
    ++seen;
    EXPECT_EQ(reference.at({static_cast<int>(a.space), address}), a.size);
  });
  EXPECT_EQ(seen, reference.size());
}

TEST(MemoryModel, AllocFreePeak) {
  MemoryModel m;
  EXPECT_EQ(m.Apply(E(1, Api::kCudaMalloc, 0x1000, 100)).effect, Effect::kAllocated);
  EXPECT_EQ(m.Apply(E(2, Api::kCudaMalloc, 0x2000, 300)).effect, Effect::kAllocated);
  Outcome freed = m.Apply(E(3, Api::kCudaFree, 0x1000));
  EXPECT_EQ(freed.effect, Effect::kFreed);
  ASSERT_TRUE(freed.has_previous);
  EXPECT_EQ(freed.previous.size, 100u);
  EXPECT_EQ(freed.previous.kind, Kind::kDevice);
  EXPECT_EQ(m.Apply(E(4, Api::kCudaMalloc, 0x3000, 50)).effect, Effect::kAllocated);
  const Series& d = S(m, 0, Kind::kDevice);
  EXPECT_EQ(d.bytes, 350u);
  EXPECT_EQ(d.count, 2u);
  EXPECT_EQ(d.peak_bytes, 400u);
  EXPECT_EQ(d.peak_count, 2u);
  EXPECT_EQ(d.peak.index, 1u);
  EXPECT_EQ(d.peak.seq, 2u);
  EXPECT_EQ(d.peak.time_ns, 200);
  EXPECT_EQ(d.allocations, 3u);
  EXPECT_EQ(d.allocated_bytes, 450u);
  EXPECT_EQ(m.live().size(), 2u);
  EXPECT_EQ(m.stats().events, 4u);
}

TEST(MemoryModel, PeakIsTheFirstTimeTheMaximumIsReached) {
  MemoryModel m;
  m.Apply(E(1, Api::kCudaMalloc, 0x1000, 100));
  m.Apply(E(2, Api::kCudaFree, 0x1000));
  m.Apply(E(3, Api::kCudaMalloc, 0x1000, 100));
  EXPECT_EQ(S(m, 0, Kind::kDevice).peak.seq, 1u);
}

TEST(MemoryModel, FreedThroughAnotherApiOfTheSameSpace) {
  MemoryModel m;
  m.Apply(E(1, Api::kCuMemHostAlloc, 0x1000, 64, -1));
  Outcome o = m.Apply(E(2, Api::kCudaFreeHost, 0x1000, 0, 0));  // the free's device does not matter
  EXPECT_EQ(o.effect, Effect::kFreed);
  EXPECT_EQ(S(m, -1, Kind::kPinnedHost).bytes, 0u);
  EXPECT_EQ(S(m, -1, Kind::kPinnedHost).peak_bytes, 64u);
}

TEST(MemoryModel, ReplaceUnmatchedAndFailures) {
  MemoryModel m;
  m.Apply(E(1, Api::kCudaMalloc, 0x1000, 100));
  Outcome r = m.Apply(E(2, Api::kCuMemAllocManaged, 0x1000, 30));
  EXPECT_EQ(r.effect, Effect::kReplaced);
  EXPECT_EQ(r.previous.size, 100u);
  EXPECT_EQ(S(m, 0, Kind::kDevice).bytes, 0u);
  EXPECT_EQ(S(m, 0, Kind::kManaged).bytes, 30u);
  EXPECT_EQ(m.stats().overwritten, 1u);

  EXPECT_EQ(m.Apply(E(3, Api::kCudaFree, 0x9999)).effect, Effect::kUnmatchedFree);
  EXPECT_EQ(m.stats().unmatched_frees, 1u);

  Outcome ff = m.Apply(E(4, Api::kCudaFree, 0x1000, 0, 0, 0, 1));
  EXPECT_EQ(ff.effect, Effect::kFailedFree);
  EXPECT_TRUE(ff.has_previous);
  EXPECT_EQ(ff.previous.size, 30u);
  EXPECT_EQ(m.live().size(), 1u);

  EXPECT_EQ(m.Apply(E(5, Api::kCudaMalloc, 0x5000, 1 << 30, 0, 0, 2)).effect, Effect::kFailedAlloc);
  EXPECT_EQ(m.live().size(), 1u);
  EXPECT_EQ(m.stats().failed_allocations, 1u);
  EXPECT_EQ(m.stats().failed_frees, 1u);
}

TEST(MemoryModel, SpacesAreSeparate) {
  MemoryModel m;
  // The same number as a VMM handle, a mapping address, a reservation and a plain allocation.
  m.Apply(E(1, Api::kCuMemAddressReserve, 0x1000, 1 << 30));
  m.Apply(E(2, Api::kCuMemCreate, 0x1000, 2 << 20));
  m.Apply(E(3, Api::kCuMemMap, 0x1000, 2 << 20));
  m.Apply(E(4, Api::kCuMemAlloc, 0x1000, 4096));
  EXPECT_EQ(m.live().size(), 4u);
  EXPECT_EQ(m.stats().overwritten, 0u);
  m.Apply(E(5, Api::kCuMemUnmap, 0x1000));
  EXPECT_EQ(S(m, 0, Kind::kVmmMapped).bytes, 0u);
  EXPECT_EQ(S(m, 0, Kind::kVmmPhysical).bytes, 2u << 20);
  m.Apply(E(6, Api::kCuMemRelease, 0x1000));
  m.Apply(E(7, Api::kCuMemAddressFree, 0x1000));
  EXPECT_EQ(m.live().size(), 1u);
  EXPECT_NE(m.live().Find(format::Space::kAllocation, 0x1000), nullptr);
  EXPECT_EQ(m.live().Find(format::Space::kVmmHandle, 0x1000), nullptr);
}

TEST(MemoryModel, DeviceTotalCountsOnlyDeviceMemory) {
  MemoryModel m;
  m.Apply(E(1, Api::kCuMemAlloc, 0x1, 1000));                // device
  m.Apply(E(2, Api::kCuMemAllocManaged, 0x2, 200));          // managed
  m.Apply(E(3, Api::kCudaMallocAsync, 0x3, 30));             // pool
  m.Apply(E(4, Api::kCuMemCreate, 0x4, 4));                  // vmm_physical
  m.Apply(E(5, Api::kCuMemMap, 0x5, 4));                     // vmm_mapped: not again
  m.Apply(E(6, Api::kCuMemAddressReserve, 0x6, 1 << 30));    // address space: never
  m.Apply(E(7, Api::kCudaHostAlloc, 0x7, 50000));            // host memory recorded on device 0: not device memory
  m.Apply(E(8, Api::kCudaHostRegister, 0x8, 60000));
  m.Apply(E(9, Api::kCuMemAlloc, 0x9, 7, 1));                // another device
  const Series* total = m.timelines().Find(0, kDeviceTotalSeries);
  ASSERT_NE(total, nullptr);
  EXPECT_EQ(total->bytes, 1234u);
  EXPECT_EQ(total->count, 4u);
  EXPECT_EQ(total->peak_bytes, 1234u);
  EXPECT_EQ(m.timelines().Find(1, kDeviceTotalSeries)->bytes, 7u);
  EXPECT_EQ(S(m, 0, Kind::kAddressReserve).bytes, 1u << 30);
  m.Apply(E(10, Api::kCuMemFree, 0x1));
  EXPECT_EQ(total->bytes, 234u);
  EXPECT_EQ(total->peak_bytes, 1234u);
}

TEST(StackGroups, GroupByStackLargestFirstWithTotals) {
  MemoryModel m;
  m.Apply(E(1, Api::kCudaMalloc, 0x1, 100, 0, 7));
  m.Apply(E(2, Api::kCudaMalloc, 0x2, 100, 0, 7));
  m.Apply(E(3, Api::kCudaMalloc, 0x3, 300, 0, 8));
  m.Apply(E(4, Api::kCudaMalloc, 0x4, 50, 0, 9));
  m.Apply(E(5, Api::kCudaMalloc, 0x5, 200, 0, 10));  // ties with stack 7 on bytes; 7 has more allocations
  m.Apply(E(6, Api::kCudaMalloc, 0x6, 1000, 1, 7));  // another device
  SnapshotFilter f;
  f.device = 0;
  f.series = static_cast<int>(Kind::kDevice);
  GroupedSnapshot g = GroupLive(m.live(), f, 3);
  EXPECT_TRUE(g.taken);
  EXPECT_EQ(g.total_bytes, 750u);
  EXPECT_EQ(g.total_count, 5u);
  EXPECT_EQ(g.group_count, 4u);
  ASSERT_EQ(g.groups.size(), 3u);
  EXPECT_EQ(g.groups[0].stack, 8u);
  EXPECT_EQ(g.groups[1].stack, 7u);
  EXPECT_EQ(g.groups[1].bytes, 200u);
  EXPECT_EQ(g.groups[1].count, 2u);
  EXPECT_EQ(g.groups[2].stack, 10u);
}

// The single-pass peak snapshots (Timelines' freed-since-peak lists + GroupAtPeaks) against brute force: replay
// again and group what is live right after each series' peak event.
TEST(StackGroups, GroupAtPeaksEqualsSnapshotsTakenAtThePeak) {
  std::mt19937_64 rng(5);
  const Api allocs[] = {Api::kCudaMalloc, Api::kCuMemAllocManaged, Api::kCudaMallocAsync, Api::kCuMemCreate,
                        Api::kCuMemMap, Api::kCudaHostAlloc, Api::kCuMemAddressReserve};
  const Api frees[] = {Api::kCudaFree, Api::kCudaFree, Api::kCudaFreeAsync, Api::kCuMemRelease, Api::kCuMemUnmap,
                       Api::kCudaFreeHost, Api::kCuMemAddressFree};
  for (int round = 0; round < 200; ++round) {
    std::vector<Event> events;
    const int n = 1 + static_cast<int>(rng() % 400);
    for (int i = 0; i < n; ++i) {
      const int k = static_cast<int>(rng() % 7);
      const uint64_t address = 0x1000 * (1 + rng() % 40);  // small: frees hit, reuses replace
      const int32_t device = static_cast<int32_t>(rng() % 3) - 1;
      const int32_t result = rng() % 20 == 0 ? 2 : 0;
      if (rng() % 2) {
        events.push_back(E(i + 1, allocs[k], address, rng() % 5 == 0 ? 0 : 1 + rng() % 1000, device, 1 + rng() % 6,
                           result));
      } else {
        events.push_back(E(i + 1, frees[k], address, 0, device, 0, result));
      }
    }
    MemoryModel one;
    for (const Event& e : events) one.Apply(e);
    std::map<std::pair<int32_t, int>, GroupedSnapshot> fast;
    GroupAtPeaks(one.live(), one.timelines(), 1000, nullptr, [&](int32_t device, int series, GroupedSnapshot g) {
      fast[{device, series}] = std::move(g);
    });
    // Brute force.
    std::map<uint64_t, std::vector<std::pair<int32_t, int>>> at;  // peak index -> series
    for (const DeviceSeries* d : one.timelines().Devices()) {
      for (int series = 1; series < kNumSeries; ++series) {
        if (d->series[series].peak_bytes != 0) at[d->series[series].peak.index].push_back({d->device, series});
      }
    }
    ASSERT_EQ(fast.size(), [&] {
      size_t c = 0;
      for (const auto& [i, v] : at) c += v.size();
      return c;
    }()) << round;
    MemoryModel two;
    for (size_t i = 0; i < events.size(); ++i) {
      two.Apply(events[i]);
      auto it = at.find(i);
      if (it == at.end()) continue;
      for (const auto& [device, series] : it->second) {
        SnapshotFilter f;
        f.device = device;
        f.series = series;
        const GroupedSnapshot slow = GroupLive(two.live(), f, 1000);
        const GroupedSnapshot& quick = fast[{device, series}];
        ASSERT_EQ(quick.total_bytes, slow.total_bytes) << round << " " << device << " " << series;
        ASSERT_EQ(quick.total_count, slow.total_count) << round;
        ASSERT_EQ(quick.groups.size(), slow.groups.size()) << round;
        for (size_t g = 0; g < slow.groups.size(); ++g) {
          EXPECT_EQ(quick.groups[g].stack, slow.groups[g].stack);
          EXPECT_EQ(quick.groups[g].bytes, slow.groups[g].bytes);
          EXPECT_EQ(quick.groups[g].count, slow.groups[g].count);
        }
        // The snapshot's bytes are the peak.
        EXPECT_EQ(quick.total_bytes, one.timelines().Find(device, series)->peak_bytes);
      }
    }
  }
}

}  // namespace
}  // namespace cumemtrace::analyzer
