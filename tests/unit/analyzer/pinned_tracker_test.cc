// PinnedTracker: windows, rises (including spikes that come and go inside one window), who allocated, timeline.
#include "analyzer/model/usage/pinned_tracker.h"

#include "analyzer/reader/api_lookup.h"
#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

using format::Api;

class PinnedFixture : public ::testing::Test {
 protected:
  void Apply(PinnedTracker& t, uint64_t seq, double t_ms, Api api, uint64_t address, uint64_t size = 0,
             uint32_t thread = 0, uint64_t stack = 0) {
    Event e;
    e.seq = seq;
    e.time_ns = static_cast<int64_t>(t_ms * 1e6);
    e.api = api;
    e.info = LookupApi(static_cast<uint32_t>(api));
    e.address = address;
    e.size = size;
    e.thread = thread;
    e.stack = stack;
    e.device = -1;
    t.OnEvent(e, model_.Apply(e));
  }
  MemoryModel model_;
};

TEST_F(PinnedFixture, WindowsRisesAndAttribution) {
  PinnedTracker t(0, 10'000'000);  // 10 ms: 1 ms windows (the minimum), 11 of them
  Apply(t, 1, 2.1, Api::kCudaHostAlloc, 0x1, 100, 1, 7);  // a spike inside window 2
  Apply(t, 2, 2.5, Api::kCudaFreeHost, 0x1);
  Apply(t, 3, 5.5, Api::kCudaHostAlloc, 0x2, 50, 1, 7);   // window 5: +50
  Apply(t, 4, 6.2, Api::kCudaHostAlloc, 0x3, 70, 2, 9);   // window 6: +70 by thread 2
  Apply(t, 5, 6.3, Api::kCudaHostAlloc, 0x4, 30, 1, 7);   // +30 by thread 1
  Apply(t, 6, 6.4, Api::kCudaMalloc, 0x5, 1000, 1, 7);    // device memory: ignored
  Apply(t, 7, 6.5, Api::kCudaFreeHost, 0x2);              // -50
  Apply(t, 8, 9.0, Api::kCudaHostRegister, 0x6, 999);     // registered, not pinned: ignored
  PinnedResult r = t.Finish();
  ASSERT_TRUE(r.computed);
  EXPECT_EQ(r.window_ns, 1'000'000);
  ASSERT_EQ(r.windows.size(), 11u);
  EXPECT_EQ(r.windows[2].start_bytes, 0u);
  EXPECT_EQ(r.windows[2].max_bytes, 100u);
  EXPECT_EQ(r.windows[2].rise_bytes, 100u);
  EXPECT_EQ(r.windows[3].rise_bytes, 0u);
  EXPECT_EQ(r.windows[5].rise_bytes, 50u);
  EXPECT_EQ(r.windows[6].start_bytes, 50u);
  EXPECT_EQ(r.windows[6].max_bytes, 150u);
  EXPECT_EQ(r.windows[6].rise_bytes, 100u);
  EXPECT_EQ(r.windows[6].top_thread, 2u);
  EXPECT_EQ(r.windows[6].top_stack, 9u);
  EXPECT_EQ(r.windows[6].top_allocated_bytes, 70u);
  EXPECT_EQ(r.windows[6].allocated_bytes, 100u);
  EXPECT_EQ(r.windows[6].allocations, 2u);
  EXPECT_EQ(r.windows[7].start_bytes, 100u);
  EXPECT_EQ(r.windows[10].max_bytes, 100u);
  EXPECT_EQ(r.peak_bytes, 150u);
  EXPECT_EQ(r.peak_time_ns, 6'300'000);
  EXPECT_EQ(r.peak_seq, 5u);
  EXPECT_EQ(r.final_bytes, 100u);
  EXPECT_EQ(r.allocations, 4u);
  EXPECT_EQ(r.allocated_bytes, 250u);
  // 50 buckets of 200 us: the spike at 2.1-2.5 ms is bucket 10 and 12.
  ASSERT_EQ(r.timeline.size(), 50u);
  EXPECT_EQ(r.timeline[1].time_ns, 200'000);
  EXPECT_EQ(r.timeline[9].bytes, 0u);
  EXPECT_EQ(r.timeline[10].bytes, 100u);
  EXPECT_EQ(r.timeline[11].bytes, 100u);
  EXPECT_EQ(r.timeline[12].bytes, 100u);  // held 100 until the free at 2.5 ms
  EXPECT_EQ(r.timeline[13].bytes, 0u);
  EXPECT_EQ(r.timeline[31].bytes, 150u);
  EXPECT_EQ(r.timeline[49].bytes, 100u);
}

TEST_F(PinnedFixture, LongTraceHas201WindowsAndEventsOutsideClamp) {
  PinnedTracker t(1'000, 2'000'000'000);  // 2 s: windows of 10 ms
  Apply(t, 1, -5.0, Api::kCudaHostAlloc, 0x1, 10);    // before the start: window 0
  Apply(t, 2, 5000.0, Api::kCudaHostAlloc, 0x2, 20);  // after the end: the last window
  Apply(t, 3, 1.0, Api::kCudaHostAlloc, 0x3, 40);     // time went backwards: stays in the last window
  PinnedResult r = t.Finish();
  EXPECT_EQ(r.window_ns, 10'000'000);
  ASSERT_EQ(r.windows.size(), 201u);
  EXPECT_EQ(r.windows[0].rise_bytes, 10u);
  EXPECT_EQ(r.windows[200].start_bytes, 10u);
  EXPECT_EQ(r.windows[200].rise_bytes, 60u);
  EXPECT_EQ(r.timeline[49].bytes, 70u);
}

TEST_F(PinnedFixture, NothingPinned) {
  PinnedTracker t(0, 0);
  PinnedResult r = t.Finish();
  EXPECT_EQ(r.windows.size(), 1u);
  EXPECT_EQ(r.peak_bytes, 0u);
  EXPECT_EQ(r.windows[0].rise_bytes, 0u);
}

}  // namespace
}  // namespace cumemtrace::analyzer
